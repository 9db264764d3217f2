"""Server-side apply of the stack's monitoring objects, and the Prometheus Operator's
CRDs, as the stack's admin.

Server-side apply (``PATCH`` with ``application/apply-patch+yaml``, field manager
``sluice-dev``, conflicts forced) makes every ``prepare`` idempotent and brings an
object left by an older stack up to date, where a create-if-missing would keep it
stale.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from sluice_dev.kubectl import Kubectl, KubectlError
from sluice_dev.monitoring.resources import object_path
from sluice_dev.paths import Layout
from sluice_dev.servers import kube

FIELD_MANAGER: Final = "sluice-dev"


class ApplyError(RuntimeError):
    """The API server refused an object; the message names it and says why."""


def apply(layout: Layout, body: Mapping[str, Any], *, identity: str = "admin") -> dict[str, Any]:
    """Create or update ``body``; returns the object as the API server holds it."""
    path = f"{object_path(body)}?fieldManager={FIELD_MANAGER}&force=true"
    try:
        status, answer = kube.api_request(
            layout,
            "PATCH",
            path,
            body,
            identity=identity,
            content_type="application/apply-patch+yaml",
            timeout=30.0,
        )
    except (OSError, ssl.SSLError) as err:
        raise ApplyError(f"{body['kind']} {body['metadata']['name']}: {err}") from err
    if status not in (200, 201):
        reason = answer[-500:].decode(errors="replace")
        raise ApplyError(f"{body['kind']} {body['metadata']['name']}: {status} {reason}")
    result: dict[str, Any] = json.loads(answer)
    return result


def apply_all(layout: Layout, bodies: Iterable[Mapping[str, Any]]) -> None:
    for body in bodies:
        apply(layout, body)


def install_crds(layout: Layout, directory: Path, *, timeout: float = 120.0) -> list[str]:
    """Apply every CRD file in ``directory`` server-side (several are larger than the
    262,144 bytes a client-side apply may keep in its annotation) and wait until each
    is Established; returns the CRDs' names."""
    kubectl = Kubectl(layout, timeout=timeout)
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise ApplyError(f"no CRD files in {directory}")
    args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}"]
    try:
        applied = kubectl(*args, *(f"-f={path}" for path in files), "-o", "name")
        names = [line.split("/", 1)[1] for line in applied.split() if "/" in line]
        kubectl(
            "wait", "--for=condition=Established", f"--timeout={int(timeout)}s", *applied.split()
        )
    except KubectlError as err:
        raise ApplyError(f"the Prometheus Operator's CRDs from {directory}: {err}") from err
    return names


def wait_served(layout: Layout, path: str, *, timeout: float = 60.0) -> None:
    """Wait until the API serves ``path`` (a CRD's resources answer 404 for a moment
    after it is Established)."""
    deadline = time.monotonic() + timeout
    status = 0
    while time.monotonic() < deadline:
        status, _body = kube.api_request(layout, "GET", path)
        if status == 200:
            return
        time.sleep(0.3)
    raise ApplyError(f"{path} not served after {timeout:.0f}s (last answer {status})")
