"""The operator reads every driver's ``/metrics``, and a driver runs a tenant's image:
the read is bounded (issue 22, "the operator never trusts a driver"). Before, it
followed redirects, read any size into memory, and its 1 s timeout applied to each
socket read, so a server trickling a byte at a time held a reconcile thread for as
long as it liked (4 s in the review's probe).

Each case is a small HTTP server on loopback in this process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sluice_operator.progress import scrape

pytestmark = pytest.mark.unit
PIPELINE = "ns/kpis"
BODY = (
    f'sluice_epoch{{pipeline="{PIPELINE}"}} 4\n'
    f'sluice_last_committed_batch_id{{pipeline="{PIPELINE}"}} 17\n'
    f'sluice_last_commit_timestamp_seconds{{pipeline="{PIPELINE}"}} 1795546165\n'
).encode()

Behaviour = Callable[[BaseHTTPRequestHandler], None]


class Served:
    """What a test server saw: requests, and whether it finished sending."""

    def __init__(self) -> None:
        self.requests = 0
        self.finished = threading.Event()
        self.cut = threading.Event()


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], tuple[int, Served]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(behaviour: Behaviour) -> tuple[int, Served]:
        served = Served()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests += 1
                try:
                    behaviour(self)
                    served.finished.set()
                except (BrokenPipeError, ConnectionResetError):
                    served.cut.set()

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1], served

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def answer(status: int, body: bytes, **headers: str) -> Behaviour:
    def behave(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.end_headers()
        handler.wfile.write(body)

    return behave


def test_a_plain_answer_is_read(serve: Callable[[Behaviour], tuple[int, Served]]) -> None:
    port, _ = serve(answer(200, BODY, Content_Length=str(len(BODY))))
    progress = scrape("127.0.0.1", port, PIPELINE)
    assert progress is not None
    assert (progress.epoch, progress.batch_id) == (4, 17)


def test_a_redirect_is_not_followed(serve: Callable[[Behaviour], tuple[int, Served]]) -> None:
    elsewhere, seen = serve(answer(200, BODY))
    port, _ = serve(answer(302, b"", Location=f"http://127.0.0.1:{elsewhere}/metrics"))
    assert scrape("127.0.0.1", port, PIPELINE) is None
    assert seen.requests == 0, "the redirect's target was never asked"


@pytest.mark.parametrize("status", [404, 500, 503])
def test_an_error_status_gives_nothing(
    serve: Callable[[Behaviour], tuple[int, Served]], status: int
) -> None:
    port, _ = serve(answer(status, BODY))
    assert scrape("127.0.0.1", port, PIPELINE) is None


def test_a_trickling_answer_is_abandoned_at_the_deadline(
    serve: Callable[[Behaviour], tuple[int, Served]],
) -> None:
    """The body, a byte every 50 ms, would take about 8 s: with a deadline of 0.5 s
    for the whole read, the scrape gives up long before the server is done."""

    def trickle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.end_headers()
        for byte in BODY:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.05)  # the server's own pace, not a wait of the test

    port, served = serve(trickle)
    assert scrape("127.0.0.1", port, PIPELINE, timeout=0.5) is None
    assert not served.finished.is_set(), "the scrape returned before the body was sent"


@pytest.mark.parametrize("declared", [True, False])
def test_an_endless_answer_is_cut_at_the_size_limit(
    serve: Callable[[Behaviour], tuple[int, Served]], declared: bool
) -> None:
    """1 GB (with or without a Content-Length saying so) is refused after at most the
    limit (4 MiB), not read into the operator's memory."""
    gigabyte = 1024**3

    def flood(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        if declared:
            handler.send_header("Content-Length", str(gigabyte))
        handler.end_headers()
        block = b"#" * 65536
        for _ in range(gigabyte // len(block)):
            handler.wfile.write(block)

    port, served = serve(flood)
    assert scrape("127.0.0.1", port, PIPELINE, timeout=30) is None
    assert served.cut.wait(30), "the server could not send the rest: the operator hung up"
    assert not served.finished.is_set()
