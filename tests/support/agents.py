"""Node agents of one test: a private agent process running one tainted node, so a
test can partition or crash it without touching the stack's shared nodes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from sluice_dev import procs
from sluice_dev.paths import Layout
from sluice_dev.servers import kube, nodeagent
from tests.support.waiting import wait_for

ISOLATION_TAINT = "sluice.dev/isolated"


def isolation_toleration(node: str) -> dict[str, str]:
    """Tolerates the taint ``sluice.dev/isolated=<node>:NoSchedule`` of a test's node."""
    return {"key": ISOLATION_TAINT, "operator": "Equal", "value": node, "effect": "NoSchedule"}


@dataclass(frozen=True)
class PrivateAgent:
    """A node agent process of one test, running one tainted node."""

    node: str
    port: int
    process: subprocess.Popen[bytes]

    def toleration(self) -> dict[str, str]:
        return isolation_toleration(self.node)


@contextmanager
def private_agent(
    layout: Layout,
    core: CoreV1Api,
    workdir: Path,
    *,
    labels: dict[str, str] | None = None,
    images: dict[str, Path] | None = None,
) -> Iterator[PrivateAgent]:
    """Run an agent with one node tainted ``sluice.dev/isolated=<node>:NoSchedule``;
    ``images`` map image names to code roots (default: any image, no code root).
    Images without an entrypoint of their own run the job's, as on the stack's agent."""
    node = f"sluice-test-{uuid.uuid4().hex[:6]}"
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "sluice_dev.nodeagent",
        f"--kubeconfig={kube.node_agent_kubeconfig(layout)}",
        f"--nodes={node}",
        f"--control-port={port}",
        f"--state-dir={workdir / node}",
        "--image-root=*=",
        nodeagent.default_entrypoint_flag(),
        *(f"--image-root={image}={root}" for image, root in (images or {}).items()),
        f"--taint={ISOLATION_TAINT}={node}:NoSchedule",
        *(f"--label={key}={value}" for key, value in (labels or {}).items()),
    ]
    env = {**os.environ, **procs.marker_env(layout.stack)}
    with (workdir / f"{node}.log").open("ab") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: node_ready(core, node) == "True", timeout=30, what=f"{node} Ready")
        yield PrivateAgent(node, port, process)
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_default_service_account(core: CoreV1Api, namespace: str) -> None:
    """Until the ServiceAccount controller has made ``default`` in ``namespace`` (a pod
    that mounts its token cannot be admitted before)."""
    wait_for(
        lambda: any(
            a.metadata.name == "default"
            for a in core.list_namespaced_service_account(namespace).items
        ),
        timeout=30,
        what="the default ServiceAccount",
    )
