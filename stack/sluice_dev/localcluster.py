"""The operator's side of the local stack, as a user sets it up: the CRD, a namespace
and an operator process serving it, job images on the node agent, and the chart's
driver ClusterRole. One copy for ``make demo``, ``sluice-dev pipeline apply``, the soak
and the benchmark's executor run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Final

import yaml

from sluice_dev import procs, stack
from sluice_dev.kubectl import Kubectl
from sluice_dev.nodeagent.podspec import IMAGE_ENV_FILE
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.servers import nodeagent, tools
from sluice_dev.servers.spark import NAME as SPARK_JARS
from sluice_dev.servers.spark import spark_jars

Say = Callable[[str], None]
CRD: Final = REPO_ROOT / "crds" / "streamingpipelines.sluice.dev.yaml"
CHART: Final = REPO_ROOT / "charts" / "sluice"
OPERATOR_START_TIMEOUT: Final = 120.0


def install_crd(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    kubectl("wait", "--for=condition=Established", "crd/streamingpipelines.sluice.dev")


def operator_for(
    layout: Layout, kubectl: Kubectl, *, namespace: str, name: str, port: int, say: Say
) -> None:
    """The CRD installed, ``namespace`` created and an operator process of the stack
    (``name``, health and metrics on ``port``) serving it; one already running is kept."""
    install_crd(kubectl)
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    pid = procs.read_pid(layout.pidfile(name))
    if pid is not None and procs.pid_alive(pid):
        say(f"operator already running (pid {pid})")
        return
    pid = start_operator(layout, namespace=namespace, name=name, port=port)
    say(f"operator pid {pid}, log {layout.log(name)}")


def start_operator(layout: Layout, *, namespace: str, name: str, port: int) -> int:
    """``python -m sluice_operator`` serving ``namespace``, a process of the stack named
    ``name``; returns its pid once its ``/healthz`` on ``port`` answers."""
    argv = [
        sys.executable,
        "-m",
        "sluice_operator",
        f"--namespace={namespace}",
        f"--lease-namespace={namespace}",
        "--http-host=127.0.0.1",
        f"--http-port={port}",
        "--no-leader-election",
    ]
    env = {**os.environ, "KUBECONFIG": str(layout.kubeconfig), **procs.marker_env(layout.stack)}
    pid = procs.spawn(
        argv, log=layout.log(name), pidfile=layout.pidfile(name), env=env, cwd=REPO_ROOT
    )
    deadline = time.monotonic() + OPERATOR_START_TIMEOUT
    while not http_ok(f"http://127.0.0.1:{port}/healthz"):
        if not procs.pid_alive(pid):
            raise stack.StackError(f"the operator exited; log {layout.log(name)}")
        if time.monotonic() > deadline:
            raise stack.StackError(f"the operator's /healthz on port {port}: no answer")
        time.sleep(0.3)
    return pid


def register_job_images(layout: Layout, image: str, versions: Sequence[str]) -> list[str]:
    """``image:version`` for each version on the node agent, as the job image: no code
    of its own (the driver's is installed) and Spark's Kafka jars where its
    ``image.env`` says. Returns the image references."""
    stack.provision(layout, [SPARK_JARS], say=lambda _line: None)
    jars = ",".join(str(j) for j in spark_jars(layout))
    references = []
    for version in versions:
        root = layout.stack / "images" / image.replace("/", "_") / version
        root.mkdir(parents=True, exist_ok=True)
        (root / IMAGE_ENV_FILE).write_text(f"SLUICE_SPARK_JARS={jars}\n")
        nodeagent.register_image(layout, f"{image}:{version}", root)
        references.append(f"{image}:{version}")
    return references


def apply_chart_cluster_role(layout: Layout, kubectl: Kubectl, name: str) -> None:
    """The chart's ClusterRole ``name`` (e.g. the driver's, which a driver with executor
    pods is bound to), as ``helm install sluice`` creates it: rendered by the
    provisioned helm, applied as the stack's admin."""
    stack.provision(layout, [tools.HELM.name], say=lambda _line: None)
    helm = tools.helm(layout)
    rendered = subprocess.run(
        [str(helm), "template", "sluice", str(CHART)], check=True, capture_output=True, text=True
    ).stdout
    [role] = [
        doc
        for doc in yaml.safe_load_all(rendered)
        if doc and doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == name
    ]
    kubectl.apply(role)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False
