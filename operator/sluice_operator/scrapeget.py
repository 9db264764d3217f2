"""One HTTP exchange with a driver, under one deadline the driver cannot stretch.

The operator reads every driver's ``/metrics`` and sends a hot standby its promotion
(``promote``), and a driver runs a tenant's image. ``http.client`` cannot bound the whole
exchange: its timeout is per socket operation, and while it reads the status line and
headers it loops over ``100 Continue`` answers and header lines for as long as the
server sends them (issue 38: a server answering ``100 Continue`` every 0.5 s held a
1 s scrape for 12 s). So the request is written and the answer read here, on a plain
socket: every ``recv`` may take only what is left of the one deadline, the answer is
at most ``limit`` bytes of body after at most :data:`HEAD_LIMIT` of status line and
headers, and only ``200`` with an identity body counts. HTTP/1.0 is asked for, so a
well-behaved server (the driver's ``prometheus_client``) sends no chunks and closes
the connection after the body.

:func:`answer` and :func:`status_of` are pure (the bytes received -> the body or the
status); :func:`get`, :func:`post` and :func:`exchange` are the socket.
"""

from __future__ import annotations

import enum
import re
import socket
import time
from dataclasses import dataclass
from typing import Final

HEAD_LIMIT: Final = 16 * 1024
"""Status line and headers; the driver's are a few hundred bytes."""
CHUNK: Final = 64 * 1024
STATUS: Final = re.compile(rb"HTTP/1\.[01] (\d{3})(?: [^\r\n]*)?")


class Outcome(enum.Enum):
    """How an exchange went, for the operator's patience with the driver
    (``scrapes``)."""

    ANSWERED = "answered"
    """A usable answer."""
    UNREACHABLE = "unreachable"
    """No connection (not listening yet, gone)."""
    MISBEHAVED = "misbehaved"
    """Connected, then too slow, too much, or not an answer that is taken."""


@dataclass(frozen=True)
class Reply:
    outcome: Outcome
    body: bytes | None = None
    """A ``GET``'s body, when answered."""
    status: int | None = None
    """A ``POST``'s status code, when answered."""


def get(host: str, port: int, path: str, timeout: float, limit: int) -> bytes | None:
    """The body of ``GET path`` on ``host:port``, or ``None`` if the exchange fails,
    takes longer than ``timeout`` seconds in all, answers anything but ``200`` or more
    than ``limit`` bytes."""
    return get_reply(host, port, path, timeout, limit).body


def get_reply(host: str, port: int, path: str, timeout: float, limit: int) -> Reply:
    """:func:`get`, saying how it went."""
    message = request(host, port, "GET", path)
    connected, received = exchange(host, port, message, timeout, HEAD_LIMIT + limit)
    body = None if received is None else answer(received, limit)
    if body is not None:
        return Reply(Outcome.ANSWERED, body=body)
    return Reply(Outcome.MISBEHAVED if connected else Outcome.UNREACHABLE)


def post(host: str, port: int, path: str, body: bytes, timeout: float) -> Reply:
    """``POST path`` with a JSON ``body``: answered with the status code of a complete
    answer within ``timeout`` seconds in all. Nothing of the answer beyond its status
    line is used, and at most :data:`HEAD_LIMIT` of it read."""
    message = request(host, port, "POST", path, body)
    connected, received = exchange(host, port, message, timeout, HEAD_LIMIT)
    status = None if received is None else status_of(received)
    if status is not None:
        return Reply(Outcome.ANSWERED, status=status)
    return Reply(Outcome.MISBEHAVED if connected else Outcome.UNREACHABLE)


def request(host: str, port: int, method: str, path: str, body: bytes | None = None) -> bytes:
    """An HTTP/1.0 request: the server closes the connection after its answer."""
    head = f"{method} {path} HTTP/1.0\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    if body is None:
        return (head + "Accept: text/plain\r\n\r\n").encode("ascii")
    sized = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return (head + sized).encode("ascii") + body


def exchange(
    host: str, port: int, message: bytes, timeout: float, cap: int
) -> tuple[bool, bytes | None]:
    """Send ``message`` and receive the answer, all within ``timeout`` seconds:
    whether it connected, and what it received (``None`` if the connection fails, the
    deadline passes or the answer passes ``cap`` bytes)."""
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError:  # refused, unreachable, timed out (TimeoutError is an OSError)
        return False, None
    try:
        with sock:
            _restrict(sock, deadline)
            sock.sendall(message)
            return True, _receive(sock, deadline, cap)
    except OSError:  # reset, timed out
        return True, None


def status_of(data: bytes) -> int | None:
    """The status code of an HTTP/1.x answer's status line, if it is one (a head
    received whole or in part)."""
    line = data.split(b"\r\n", 1)[0]
    status = STATUS.fullmatch(line)
    return None if status is None else int(status.group(1))


def _receive(sock: socket.socket, deadline: float, cap: int) -> bytes | None:
    """Everything the server sends until it closes, or until a declared body is
    complete; ``None`` past ``cap`` bytes."""
    data = bytearray()
    expected: int | None = None
    while expected is None or len(data) < expected:
        _restrict(sock, deadline)
        chunk = sock.recv(CHUNK)
        if not chunk:
            break
        data += chunk
        if len(data) > cap:
            return None
        if expected is None:
            expected = _complete_length(bytes(data))
            if expected is not None and expected > cap:
                return None
    return bytes(data)


def _complete_length(data: bytes) -> int | None:
    """Once the head has arrived and declares a Content-Length: the size of the whole
    answer, so a server that keeps the connection open is not waited for."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    length = _headers(data[:end]).get("content-length", "")
    return end + 4 + int(length) if length.isdigit() else None


def answer(data: bytes, limit: int) -> bytes | None:
    """The body of a complete HTTP/1.x answer if its status is 200, its body is not
    chunked or compressed and at most ``limit`` bytes (all of what the Content-Length
    declares); ``None`` for anything else."""
    end = data.find(b"\r\n\r\n")
    if end < 0 or end > HEAD_LIMIT:
        return None
    head, body = data[:end], data[end + 4 :]
    status = STATUS.fullmatch(head.split(b"\r\n", 1)[0])
    if status is None or status.group(1) != b"200":
        return None
    headers = _headers(head)
    if headers.get("transfer-encoding", "identity") != "identity":
        return None
    if headers.get("content-encoding", "identity") != "identity":
        return None
    length = headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) != len(body)):
        return None
    return body if len(body) <= limit else None


def _headers(head: bytes) -> dict[str, str]:
    """Header names (lower case) and values of a head; a repeated name keeps the last."""
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return headers


def _restrict(sock: socket.socket, deadline: float) -> None:
    """The next socket operation may take what is left of the deadline, no more."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the driver's answer took longer than the deadline")
    sock.settimeout(left)
