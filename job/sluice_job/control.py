"""A standby's control port: where the operator promotes it (``sluice_api.promotion``).

Why it exists: a hot standby claims only when the operator says the running driver is
gone, and the driver has no access to the API server to find out. One request, on a
port of its own (the chart's NetworkPolicy lets only the operator in), naming the epoch
the standby was started with; anything else is refused. The server runs on a daemon
thread from the standby's start until it has claimed.
"""

from __future__ import annotations

import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from sluice_api import promotion
from sluice_job import logs

SHUTDOWN_POLL_SECONDS: Final = 0.02
"""How often the serving loop looks whether it was asked to stop. ``socketserver``'s
default, 0.5 s, was half of the claim time in a warm handover's gap: the standby
closes its control port before it claims."""


class Control:
    """Serves ``POST /promote`` on ``host:port`` and sets :attr:`promoted` when the
    operator promotes the standby of ``epoch``."""

    def __init__(self, host: str, port: int, epoch: int) -> None:
        self.epoch = epoch
        self.promoted = threading.Event()
        self._server = ThreadingHTTPServer((host or "0.0.0.0", port), _handler(self))
        self._server.daemon_threads = True
        self._closed = False
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
            name="sluice-control",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> Control:
        self._thread.start()
        logs.event("control port served", port=self.port, epoch=self.epoch)
        return self

    def close(self) -> None:
        """Stop serving: waits for the serving loop's next look at its shutdown flag
        (at most :data:`SHUTDOWN_POLL_SECONDS`), which a standby's takeover waits for.
        Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()

    def take(self, body: bytes) -> tuple[HTTPStatus, str]:
        """The answer to a promotion request with ``body``."""
        try:
            epoch = promotion.epoch_of(body)
        except ValueError as err:
            return HTTPStatus.BAD_REQUEST, str(err)
        if epoch != self.epoch:
            logs.event("promotion refused", level=30, asked=epoch, epoch=self.epoch)
            return HTTPStatus.CONFLICT, f"this standby claims epoch {self.epoch}, not {epoch}"
        if not self.promoted.is_set():
            logs.event("promoted", epoch=epoch)
        self.promoted.set()
        return HTTPStatus.OK, "promoted"


def _handler(control: Control) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != promotion.PATH:
                self._answer(HTTPStatus.NOT_FOUND, "not found")
                return
            length = self.headers.get("Content-Length", "")
            if not length.isdigit() or int(length) > promotion.MAX_BODY:
                self._answer(HTTPStatus.BAD_REQUEST, "a body of known length, 1 KiB at most")
                return
            self._answer(*control.take(self.rfile.read(int(length))))

        def _answer(self, status: HTTPStatus, text: str) -> None:
            data = (text + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the promotion itself is logged as an event."""

    return Handler
