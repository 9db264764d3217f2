"""The server's out-of-band switches over HTTP on loopback (clients: :mod:`.remote`).

The driver under test is another process, so tests reach the server here::

    GET    /healthz                   "ok"
    POST   /projects/<p>/faults       {"method": "Commit", "code": "UNAVAILABLE",
                                       "count": 2, "when": "before" | "after"}
    POST   /projects/<p>/holds        {"method": "Commit", "count": 1}: the next
                                       calls wait until released (at most 120 s)
    POST   /projects/<p>/release      let every held call go
    GET    /projects/<p>/stats        {"calls": {"Commit": 3, ...},
                                       "failures": {"Commit:UNAVAILABLE": 2, ...},
                                       "commit_mutations": [500, 500, 17],
                                       "entities": 1017, "pending_faults": {...},
                                       "held": {"Commit": 1}}
    DELETE /projects/<p>              forget the project's data, faults and counters

Everything is per project, so concurrent test runs (each with its own project
name) share one server without seeing each other.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sluice_dev import ports
from sluice_dev.datastore.faults import Fault, Method, When, status_code
from sluice_dev.datastore.service import Datastore


def serve(service: Datastore, port: int, host: str = ports.HOST) -> ThreadingHTTPServer:
    """Start the control server in a daemon thread; ``shutdown()`` stops it."""
    server = ThreadingHTTPServer((host, port), _handler(service))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="control", daemon=True).start()
    return server


def _handler(service: Datastore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._answer(200, "ok")
                return
            project, rest = _route(self.path)
            if project is None or rest != "stats":
                self._answer(404, {"error": f"no route {self.path}"})
                return
            self._answer(200, _stats(service, project))

        def do_POST(self) -> None:
            project, rest = _route(self.path)
            if project is None or rest not in ("faults", "holds", "release"):
                self._answer(404, {"error": f"no route {self.path}"})
                return
            if rest == "release":
                service.holds.release(project)
                self._answer(200, _stats(service, project))
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                switch = _fault(body) if rest == "faults" else _hold(body)
            except (ValueError, KeyError, TypeError) as err:
                self._answer(400, {"error": f"bad {rest} request: {err}"})
                return
            switch(service, project)
            self._answer(200, _stats(service, project))

        def do_DELETE(self) -> None:
            project, rest = _route(self.path)
            if project is None or rest:
                self._answer(404, {"error": f"no route {self.path}"})
                return
            service.forget(project)
            self._answer(200, {"forgot": project})

        def _answer(self, code: int, body: object) -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(code)
            kind = "text/plain" if isinstance(body, str) else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: requests are not worth a log line each."""

    return Handler


def _route(path: str) -> tuple[str | None, str]:
    """``/projects/<p>[/<rest>]`` -> (p, rest); (None, "") for anything else."""
    parts = path.strip("/").split("/")
    if len(parts) not in (2, 3) or parts[0] != "projects" or not parts[1]:
        return None, ""
    return urllib.parse.unquote(parts[1]), parts[2] if len(parts) == 3 else ""


Switch = Callable[[Datastore, str], None]


def _fault(body: dict[str, Any]) -> Switch:
    method, count = Method(body["method"]), _count(body)
    fault = Fault(status_code(str(body["code"])), When(body.get("when", When.BEFORE)))
    return lambda service, project: service.faults.inject(project, method, fault, count)


def _hold(body: dict[str, Any]) -> Switch:
    method, count = Method(body["method"]), _count(body)
    return lambda service, project: service.holds.arm(project, method, count)


def _count(body: dict[str, Any]) -> int:
    count = int(body.get("count", 1))
    if count < 1:
        raise ValueError("count must be at least 1")
    return count


def _stats(service: Datastore, project: str) -> dict[str, Any]:
    return {
        **service.stats.snapshot(project),
        "entities": service.store.count(project),
        "pending_faults": service.faults.pending(project),
        "held": service.holds.waiting(project),
    }
