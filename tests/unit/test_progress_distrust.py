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

from sluice_operator.progress import MAX_SAMPLES, scrape

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


def raw(*parts: bytes, pace: float, last: threading.Event) -> Behaviour:
    """Bytes written as they are, with ``pace`` seconds between them (the server's
    own pace, not a wait of the test); ``last`` is set as the last part is sent."""

    def behave(handler: BaseHTTPRequestHandler) -> None:
        for n, part in enumerate(parts, start=1):
            if n == len(parts):
                last.set()
            handler.wfile.write(part)
            handler.wfile.flush()
            time.sleep(pace)

    return behave


def head_and_body(status: bytes = b"HTTP/1.1 200 OK") -> bytes:
    return status + b"\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY


def test_endless_100_continue_answers_are_abandoned_at_the_deadline(
    serve: Callable[[Behaviour], tuple[int, Served]],
) -> None:
    """Issue 38, finding 1: ``http.client`` reads ``100 Continue`` answers in a loop,
    and the old deadline was checked only before and after that loop. A server sending
    one every 50 ms for 6 s, then its metrics, held a 0.5 s scrape until the end and
    was then believed; now the scrape gives up at its deadline, with nothing."""
    last = threading.Event()
    continues = [b"HTTP/1.1 100 Continue\r\n\r\n"] * 120
    port, _ = serve(raw(*continues, head_and_body(), pace=0.05, last=last))
    assert scrape("127.0.0.1", port, PIPELINE, timeout=0.5) is None
    assert not last.is_set(), "the scrape waited for the server's real answer"


def test_trickled_header_lines_are_abandoned_at_the_deadline(
    serve: Callable[[Behaviour], tuple[int, Served]],
) -> None:
    """Issue 38, finding 1: a header line every 50 ms for 4.5 s held the old scrape for
    all of it (each line came well within the per-read timeout)."""
    headers = [
        f"X-Slow-{n}: {n}\r\n".encode() for n in range(90)
    ]  # http.client refuses more than 100
    last = threading.Event()
    port, _ = serve(raw(b"HTTP/1.1 200 OK\r\n", *headers, b"\r\n" + BODY, pace=0.05, last=last))
    assert scrape("127.0.0.1", port, PIPELINE, timeout=0.5) is None
    assert not last.is_set(), "the scrape waited for the whole head and the body"


def test_an_infinite_epoch_gives_nothing_and_an_infinite_batch_id_counts_as_none(
    serve: Callable[[Behaviour], tuple[int, Served]],
) -> None:
    """Issue 38, finding 1: ``int(+Inf)`` raised ``OverflowError``, which the old
    handler (``ValueError`` only) let through, failing that pipeline's reconcile."""
    infinite_epoch = f'sluice_epoch{{pipeline="{PIPELINE}"}} +Inf\n'.encode()
    port, _ = serve(answer(200, infinite_epoch))
    assert scrape("127.0.0.1", port, PIPELINE) is None

    infinite_batch = BODY.replace(b"} 17\n", b"} +Inf\n")
    port, _ = serve(answer(200, infinite_batch))
    progress = scrape("127.0.0.1", port, PIPELINE)
    assert progress is not None
    assert (progress.epoch, progress.batch_id, progress.committed_at) == (4, None, None)


def test_only_the_pipelines_own_sluice_series_are_parsed(
    serve: Callable[[Behaviour], tuple[int, Served]],
) -> None:
    """A driver's exposition may carry other libraries' series (the old scrape parsed
    all of it, and one line the parser refused lost the whole answer): only the
    pipeline's own ``sluice_`` samples are read now."""
    others = (
        b"# TYPE process_cpu_seconds_total counter\n"
        b"process_cpu_seconds_total 12.5\n"
        b"this is { not a metric line\n"
        b'sluice_epoch{pipeline="ns/other"} 9\n'
    )
    port, _ = serve(answer(200, others + BODY))
    progress = scrape("127.0.0.1", port, PIPELINE)
    assert progress is not None
    assert (progress.epoch, progress.batch_id) == (4, 17)


def test_more_own_samples_than_any_driver_reports_are_not_read(
    serve: Callable[[Behaviour], tuple[int, Served]],
) -> None:
    """Parsing costs CPU under the operator's GIL (about 1.4 s for 4 MiB in the
    review): past MAX_SAMPLES samples of its own the answer is dropped, not parsed."""
    lag = "".join(
        f'sluice_consumer_lag{{pipeline="{PIPELINE}",topic="t",partition="{n}"}} 1\n'
        for n in range(MAX_SAMPLES + 1)
    ).encode()
    port, _ = serve(answer(200, BODY + lag))
    assert scrape("127.0.0.1", port, PIPELINE) is None

    fits = b"".join(lag.splitlines(keepends=True)[:100])
    port, _ = serve(answer(200, BODY + fits))
    progress = scrape("127.0.0.1", port, PIPELINE)
    assert progress is not None
    assert progress.lag == 100
