"""Flipping the Datastore server's switches from another process (tests, the demo).

Plain HTTP to the control port (see :mod:`.control` for the routes), standard
library only, so importing it costs nothing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sluice_dev import ports


def inject(
    project: str,
    method: str,
    code: str,
    *,
    count: int = 1,
    when: str = "before",
    port: int = ports.DATASTORE_CONTROL,
) -> None:
    """Make the next ``count`` calls of ``method`` in ``project`` fail with ``code``."""
    body = {"method": method, "code": code, "count": count, "when": when}
    _call(port, "POST", f"/projects/{_quote(project)}/faults", body)


def hold(project: str, method: str, *, count: int = 1, port: int = ports.DATASTORE_CONTROL) -> None:
    """Make the next ``count`` calls of ``method`` in ``project`` wait for :func:`release`."""
    _call(port, "POST", f"/projects/{_quote(project)}/holds", {"method": method, "count": count})


def release(project: str, *, port: int = ports.DATASTORE_CONTROL) -> None:
    _call(port, "POST", f"/projects/{_quote(project)}/release", {})


def stats(project: str, *, port: int = ports.DATASTORE_CONTROL) -> dict[str, Any]:
    result: dict[str, Any] = _call(port, "GET", f"/projects/{_quote(project)}/stats")
    return result


def forget(project: str, *, port: int = ports.DATASTORE_CONTROL) -> None:
    _call(port, "DELETE", f"/projects/{_quote(project)}")


def healthy(port: int = ports.DATASTORE_CONTROL) -> str | None:
    """``None`` if the control server answers ``/healthz``, else why not."""
    try:
        with urllib.request.urlopen(f"http://{ports.HOST}:{port}/healthz", timeout=2) as resp:
            return None if resp.status == 200 else f"datastore /healthz answered {resp.status}"
    except OSError as err:
        return f"datastore control port {port} not answering ({err})"


def _quote(project: str) -> str:
    return urllib.parse.quote(project, safe="")


def _call(port: int, method: str, path: str, body: object = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{ports.HOST}:{port}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise RuntimeError(
            f"datastore control: {method} {path} -> {err.code} {err.read()!r}"
        ) from err
    except OSError as err:
        raise RuntimeError(f"datastore control port {port} not answering ({err})") from err
