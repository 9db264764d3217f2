"""Temporary fixtures for the node agent tests, until the shared session fixtures of
``tests/conftest.py`` cover them: the stack's node agent (with the control plane it
needs), an admin API client, a namespace per test, and a *private* node agent whose
single node is tainted so that only the pods of the test that owns it land there
(a test may partition or crash that node without disturbing anyone else).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config
from kubernetes.client import ApiClient, CoreV1Api, V1Namespace
from kubernetes.client.exceptions import ApiException

from sluice_dev import procs, registry
from sluice_dev import stack as local_stack
from sluice_dev.paths import Layout
from sluice_dev.servers import kube, nodeagent
from tests.integration._kube_fixtures import kube_stack

__all__ = ["kube_stack"]

ISOLATION_TAINT = "sluice.dev/isolated"


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def agent_stack(kube_stack: Layout) -> Iterator[Layout]:
    """The control plane plus the stack's node agent (started if not already up)."""
    layout = kube_stack
    server = registry.server(nodeagent.NAME)
    already_up = local_stack.health(server, layout).healthy
    local_stack.up(layout, [nodeagent.NAME], say=lambda _line: None)
    yield layout
    if not already_up:
        pid = procs.read_pid(layout.pidfile(server.name))
        if pid:
            procs.terminate([pid], grace=server.stop_grace)
        layout.pidfile(server.name).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def core(kube_stack: Layout) -> CoreV1Api:
    """The core API as the stack's admin."""
    client: ApiClient = config.new_client_from_config(str(kube_stack.kubeconfig))  # type: ignore[no-untyped-call]
    return CoreV1Api(client)


@pytest.fixture
def namespace(core: CoreV1Api) -> Iterator[str]:
    name = f"test-agent-{uuid.uuid4().hex[:8]}"
    core.create_namespace(V1Namespace.model_validate({"metadata": {"name": name}}))
    yield name
    core.delete_namespace(name)


@dataclass(frozen=True)
class PrivateAgent:
    """A node agent process of one test, running one tainted node."""

    node: str
    port: int
    taint: str
    process: subprocess.Popen[bytes]

    def toleration(self) -> dict[str, str]:
        return {
            "key": ISOLATION_TAINT,
            "operator": "Equal",
            "value": self.node,
            "effect": "NoSchedule",
        }


@pytest.fixture
def private_agent(agent_stack: Layout, core: CoreV1Api, tmp_path: Path) -> Iterator[PrivateAgent]:
    layout = agent_stack
    node = f"sluice-test-{uuid.uuid4().hex[:6]}"
    port = _free_port()
    taint = f"{ISOLATION_TAINT}={node}:NoSchedule"
    argv = [
        sys.executable,
        "-m",
        "sluice_dev.nodeagent",
        f"--kubeconfig={kube.node_agent_kubeconfig(layout)}",
        f"--nodes={node}",
        f"--control-port={port}",
        f"--state-dir={tmp_path / 'agent'}",
        "--image-root=*=",
        f"--taint={taint}",
    ]
    env = {**os.environ, **procs.marker_env(layout.stack)}
    with (tmp_path / "agent.log").open("ab") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    agent = PrivateAgent(node, port, taint, process)
    try:
        wait_for(f"node {node} Ready", lambda: node_ready(core, node) == "True", timeout=30)
        yield agent
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        try:
            core.delete_node(node)
        except ApiException as err:
            if err.status != 404:
                raise


def node_ready(core: CoreV1Api, node: str) -> str | None:
    """The status of the node's Ready condition (``True``/``False``/``Unknown``)."""
    try:
        found = core.read_node(node)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    for condition in (found.status.conditions if found.status else None) or ():
        if condition.type == "Ready":
            return str(condition.status)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
