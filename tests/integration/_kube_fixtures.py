"""Temporary fixtures for the Kubernetes control-plane tests, until the shared
session fixtures of ``tests/conftest.py`` cover them: start etcd, kube-apiserver,
kube-controller-manager and kube-scheduler through the stack framework (only those
not already healthy), and stop again exactly the ones this run started.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sluice_dev import procs, registry
from sluice_dev import stack as local_stack
from sluice_dev.paths import Layout
from sluice_dev.servers import kube

CONTROL_PLANE = (kube.CONTROLLER_MANAGER, kube.SCHEDULER)


@pytest.fixture(scope="session")
def kube_stack() -> Iterator[Layout]:
    """A healthy control plane (with etcd); yields its layout."""
    layout = Layout.from_env()
    servers = local_stack.with_requirements(CONTROL_PLANE)
    already_up = {s.name for s in servers if local_stack.health(s, layout).healthy}
    local_stack.up(layout, CONTROL_PLANE, say=lambda _line: None)
    yield layout
    for server in reversed(servers):
        if server.name in already_up:
            continue
        pid = procs.read_pid(layout.pidfile(server.name))
        if pid:
            procs.terminate([pid], grace=registry.server(server.name).stop_grace)
        layout.pidfile(server.name).unlink(missing_ok=True)
