"""Flipping the Datastore server's switches from another process (tests, the demo).

Plain HTTP to the control port (see :mod:`.control` for the routes), standard
library only, so importing it costs nothing.
"""

from __future__ import annotations

from typing import Any

from sluice_dev import controlhttp, ports
from sluice_dev.controlhttp import quote as _quote


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
    return controlhttp.healthy("datastore", port)


def _call(port: int, method: str, path: str, body: object = None) -> Any:
    return controlhttp.call("datastore", port, method, path, body)
