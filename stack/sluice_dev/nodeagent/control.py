"""The agent's fault switches over HTTP on loopback, and their client functions.

Tests and the demo flip node faults while the agent runs::

    GET  /healthz                  "ok"
    GET  /nodes                    {"sluice-node-a": "ready", ...}
    GET  /pods                     [{node, namespace, pod, uid, container, pid, phase}]
    POST /nodes/<name>/partition   heartbeats and API writes stop; processes keep running
    POST /nodes/<name>/crash       processes SIGKILLed, heartbeats stop
    POST /nodes/<name>/heal        back to normal

A POST answers ``{"node": name, "state": new-state}`` once the switch has taken effect.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from sluice_dev import ports
from sluice_dev.paths import Layout


class Controls(Protocol):
    def act(self, name: str, action: str) -> str: ...

    def states(self) -> dict[str, str]: ...

    def processes(self) -> list[dict[str, Any]]: ...


def serve(controls: Controls, port: int, host: str = ports.HOST) -> ThreadingHTTPServer:
    """Start the control server in a daemon thread; ``shutdown()`` stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            routes: Mapping[str, Any] = {
                "/healthz": lambda: "ok",
                "/nodes": controls.states,
                "/pods": controls.processes,
            }
            if self.path not in routes:
                self._answer(404, {"error": f"no route {self.path}"})
                return
            result = routes[self.path]()
            self._answer(200, result)

        def do_POST(self) -> None:
            parts = self.path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "nodes":
                self._answer(404, {"error": f"no route {self.path}"})
                return
            try:
                state = controls.act(parts[1], parts[2])
            except KeyError:
                self._answer(404, {"error": f"no node {parts[1]!r}"})
                return
            except ValueError as err:
                self._answer(400, {"error": str(err)})
                return
            self._answer(200, {"node": parts[1], "state": state})

        def _answer(self, code: int, body: object) -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(code)
            self.send_header(
                "Content-Type", "text/plain" if isinstance(body, str) else "application/json"
            )
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: requests are not worth a log line each."""

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="control", daemon=True).start()
    return server


def partition(layout: Layout, node: str, *, port: int = ports.NODE_AGENT) -> None:
    """Cut ``node`` off the API: heartbeats stop, its processes keep running."""
    _post(layout, port, f"/nodes/{node}/partition")


def crash(layout: Layout, node: str, *, port: int = ports.NODE_AGENT) -> None:
    """SIGKILL ``node``'s processes and stop its heartbeats."""
    _post(layout, port, f"/nodes/{node}/crash")


def heal(layout: Layout, node: str, *, port: int = ports.NODE_AGENT) -> None:
    """Undo a partition or a crash."""
    _post(layout, port, f"/nodes/{node}/heal")


def node_states(layout: Layout, *, port: int = ports.NODE_AGENT) -> dict[str, str]:
    result: dict[str, str] = _call(layout, port, "GET", "/nodes")
    return result


def processes(layout: Layout, *, port: int = ports.NODE_AGENT) -> list[dict[str, Any]]:
    """The pod processes the agent runs, with their pids."""
    result: list[dict[str, Any]] = _call(layout, port, "GET", "/pods")
    return result


def healthy(port: int = ports.NODE_AGENT) -> str | None:
    """``None`` if the control server answers ``/healthz``, else why not."""
    try:
        with urllib.request.urlopen(f"http://{ports.HOST}:{port}/healthz", timeout=2) as resp:
            return None if resp.status == 200 else f"node agent /healthz answered {resp.status}"
    except OSError as err:
        return f"node agent control port {port} not answering ({err})"


def _post(layout: Layout, port: int, path: str) -> None:
    _call(layout, port, "POST", path)


def _call(layout: Layout, port: int, method: str, path: str) -> Any:
    """``layout`` only points at the agent's log when the call fails."""
    request = urllib.request.Request(f"http://{ports.HOST}:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise RuntimeError(f"node agent: {method} {path} -> {err.code} {err.read()!r}") from err
    except OSError as err:
        raise RuntimeError(
            f"node agent not answering on port {port} ({err}); see {layout.log('node-agent')}"
        ) from err
