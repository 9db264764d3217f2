"""One HTTP GET to a driver, under one deadline the driver cannot stretch.

The operator reads every driver's ``/metrics`` on a shared pool of reconcile
threads, and a driver runs a tenant's image. ``http.client`` cannot bound the whole
exchange: its timeout is per socket operation, and while it reads the status line and
headers it loops over ``100 Continue`` answers and header lines for as long as the
server sends them (issue 38: a server answering ``100 Continue`` every 0.5 s held a
1 s scrape for 12 s). So the request is written and the answer read here, on a plain
socket: every ``recv`` may take only what is left of the one deadline, the answer is
at most ``limit`` bytes of body after at most :data:`HEAD_LIMIT` of status line and
headers, and only ``200`` with an identity body counts. HTTP/1.0 is asked for, so a
well-behaved server (the driver's ``prometheus_client``) sends no chunks and closes
the connection after the body.

:func:`answer` is pure (the bytes received -> the body or ``None``); :func:`get` is
the socket.
"""

from __future__ import annotations

import re
import socket
import time
from typing import Final

HEAD_LIMIT: Final = 16 * 1024
"""Status line and headers; the driver's are a few hundred bytes."""
CHUNK: Final = 64 * 1024
STATUS: Final = re.compile(rb"HTTP/1\.[01] (\d{3})(?: [^\r\n]*)?")


def get(host: str, port: int, path: str, timeout: float, limit: int) -> bytes | None:
    """The body of ``GET path`` on ``host:port``, or ``None`` if the exchange fails,
    takes longer than ``timeout`` seconds in all, answers anything but ``200`` or more
    than ``limit`` bytes."""
    deadline = time.monotonic() + timeout
    request = (
        f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nAccept: text/plain\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            _restrict(sock, deadline)
            sock.sendall(request)
            received = _receive(sock, deadline, HEAD_LIMIT + limit)
    except OSError:  # refused, reset, timed out (TimeoutError is an OSError)
        return None
    return None if received is None else answer(received, limit)


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
