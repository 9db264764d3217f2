"""The fault-switch endpoints of the stack's emulators (Datastore, Pub/Sub), as a
client calls them: JSON over HTTP on loopback, per project, with errors that name the
server, the call and the answer. One copy for both ``remote`` modules."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sluice_dev import ports


def quote(project: str) -> str:
    """A project's name as one path segment."""
    return urllib.parse.quote(project, safe="")


def call(server: str, port: int, method: str, path: str, body: object = None) -> Any:
    """The JSON answer of ``method path`` on the control port of ``server``."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{ports.HOST}:{port}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise RuntimeError(
            f"{server} control: {method} {path} -> {err.code} {err.read()!r}"
        ) from err
    except OSError as err:
        raise RuntimeError(f"{server} control port {port} not answering ({err})") from err


def healthy(server: str, port: int) -> str | None:
    """``None`` if the control server answers ``/healthz``, else why not."""
    try:
        with urllib.request.urlopen(f"http://{ports.HOST}:{port}/healthz", timeout=2) as resp:
            return None if resp.status == 200 else f"{server} /healthz answered {resp.status}"
    except OSError as err:
        return f"{server} control port {port} not answering ({err})"
