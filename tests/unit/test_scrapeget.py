"""What counts as a driver's answer (``scrapeget.answer``, pure): a complete HTTP/1.x
``200`` with a plain body within the limit, nothing else."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from sluice_operator.scrapeget import HEAD_LIMIT, answer, get

pytestmark = pytest.mark.unit

BODY = b'sluice_epoch{pipeline="ns/kpis"} 4\n'


def ok(*headers: bytes, body: bytes = BODY, status: bytes = b"HTTP/1.1 200 OK") -> bytes:
    return b"\r\n".join([status, *headers]) + b"\r\n\r\n" + body


def test_a_plain_200_gives_its_body() -> None:
    assert answer(ok(), 1024) == BODY
    assert answer(ok(b"Content-Length: %d" % len(BODY)), 1024) == BODY
    assert answer(ok(status=b"HTTP/1.0 200"), 1024) == BODY


@pytest.mark.parametrize(
    "data",
    [
        ok(status=b"HTTP/1.1 100 Continue"),
        ok(status=b"HTTP/1.1 302 Found"),
        ok(status=b"HTTP/2 200"),
        ok(status=b"ICY 200 OK"),
        ok(b"Transfer-Encoding: chunked"),
        ok(b"Content-Encoding: gzip"),
        ok(b"Content-Length: %d" % (len(BODY) + 1)),
        ok(b"Content-Length: -1"),
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n",  # the head never ended
        ok(b"X-Padding: " + b"x" * HEAD_LIMIT),
    ],
    ids=[
        "100",
        "redirect",
        "http2",
        "not http",
        "chunked",
        "compressed",
        "short body",
        "bad length",
        "no end of head",
        "huge head",
    ],
)
def test_anything_else_gives_nothing(data: bytes) -> None:
    assert answer(data, 1024) is None


def test_a_body_over_the_limit_gives_nothing() -> None:
    assert answer(ok(body=b"#" * 1025), 1024) is None


@pytest.fixture
def keeps_open() -> Iterator[tuple[int, threading.Event]]:
    """A server that sends a complete answer with its Content-Length and then keeps
    the connection open (ignoring ``Connection: close``) until the test ends."""
    done = threading.Event()
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(4096)
            connection.sendall(ok(b"Content-Length: %d" % len(BODY)))
            done.wait(30)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], done
    done.set()
    server.close()


def test_a_declared_body_is_read_without_waiting_for_the_server_to_close(
    keeps_open: tuple[int, threading.Event],
) -> None:
    """Waiting for the close would run into the deadline, which gives nothing."""
    port, _ = keeps_open
    assert get("127.0.0.1", port, "/metrics", timeout=5.0, limit=1024) == BODY


def test_nothing_listening_gives_nothing() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    assert get("127.0.0.1", port, "/metrics", timeout=1.0, limit=1024) is None
