"""Reads of the API server for the monitoring loops, as one of the stack's client
identities: an object or ``None``, and one error type for "try again next cycle"."""

from __future__ import annotations

import json
import ssl
from typing import Any

from sluice_dev.paths import Layout
from sluice_dev.servers import kube


class UnavailableError(RuntimeError):
    """The API server or Prometheus did not answer as expected; retried next cycle."""


def get_json(layout: Layout, identity: str, path: str) -> dict[str, Any] | None:
    """A GET as ``identity``: the object, ``None`` when it does not exist."""
    try:
        status, body = kube.api_request(layout, "GET", path, identity=identity, timeout=10.0)
    except (OSError, ssl.SSLError) as err:
        raise UnavailableError(f"GET {path}: {err}") from err
    if status == 404:
        return None
    if status != 200:
        raise UnavailableError(f"GET {path}: {status} {body[-300:].decode(errors='replace')}")
    found: dict[str, Any] = json.loads(body)
    return found


def items(layout: Layout, identity: str, path: str) -> list[dict[str, Any]]:
    """The ``items`` of a list, empty when the collection does not exist."""
    found = get_json(layout, identity, path) or {}
    listed: list[dict[str, Any]] = found.get("items") or []
    return listed


def delete(layout: Layout, identity: str, path: str) -> None:
    """DELETE ``path`` as ``identity``; gone already counts as deleted."""
    try:
        status, body = kube.api_request(layout, "DELETE", path, identity=identity)
    except (OSError, ssl.SSLError) as err:
        raise UnavailableError(f"DELETE {path}: {err}") from err
    if status not in (200, 202, 404):
        raise UnavailableError(f"DELETE {path}: {status} {body[-300:].decode(errors='replace')}")
