"""The soak's Kubernetes side, as a user drives it: the CRD, the operator run as a
process of the stack (as ``make demo`` does), the job images on the node agent, and
the pipeline's status, driver pod and driver process read back.

Reads that poll during faults (kube-apiserver restarting) answer ``None`` instead of
raising.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from sluice_api import names
from sluice_dev import localcluster, procs, registry
from sluice_dev.kubectl import Kubectl, KubectlError
from sluice_dev.nodeagent import control
from sluice_dev.paths import Layout
from sluice_dev.servers import nodeagent
from sluice_dev.soak.manifest import Target

IMAGE: Final = "sluice-soak/job"
OWNED_KINDS: Final = "serviceaccounts,services,rolebindings,secrets,pods"
"""What the operator creates for a pipeline (``sluice_operator.builders.supporting``,
and its driver pods)."""
COLLECT_SECONDS: Final = 30.0
"""How long garbage collection gets to remove a deleted pipeline's objects."""
VERSIONS: Final = ("v1", "v2")


def install_crd(kubectl: Kubectl) -> None:
    localcluster.install_crd(kubectl)


def register_images(layout: Layout) -> list[str]:
    """``sluice-soak/job:v1`` and ``:v2``, as ``make demo`` registers its images."""
    return localcluster.register_job_images(layout, IMAGE, VERSIONS)


@dataclass
class Operator:
    """``python -m sluice_operator`` watching the soak's namespace, as a stack process."""

    layout: Layout
    namespace: str
    name: str = "soak-operator"
    port: int = 0

    def start(self) -> int:
        self.port = self.port or _free_port()
        return localcluster.start_operator(
            self.layout, namespace=self.namespace, name=self.name, port=self.port
        )

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def pid(self) -> int | None:
        return procs.read_pid(self.layout.pidfile(self.name))

    def kill(self) -> None:
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        self.layout.pidfile(self.name).unlink(missing_ok=True)

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            procs.terminate([pid], grace=10)
        self.layout.pidfile(self.name).unlink(missing_ok=True)


@dataclass(frozen=True)
class Pipeline:
    kubectl: Kubectl
    target: Target

    def get(self) -> dict[str, Any] | None:
        """The StreamingPipeline object, ``None`` if it does not exist."""
        found = json.loads(
            self.kubectl("get", "sp", "-n", self.target.namespace, "-o", "json") or "{}"
        )
        for item in found.get("items", []):
            if item["metadata"]["name"] == self.target.name:
                return dict(item)
        return None

    def status(self) -> dict[str, Any] | None:
        """Its status; ``None`` while the API does not answer."""
        try:
            found = self.get()
        except (KubectlError, ValueError):
            return None
        return dict((found or {}).get("status") or {})

    def delete(self, say: Callable[[str], None] = print) -> None:
        """Delete the pipeline (its driver stops cleanly) and what it owned
        (:meth:`collect_orphans`)."""
        self.kubectl(
            "delete", "sp", self.target.name, "-n", self.target.namespace, "--timeout=180s"
        )
        self.collect_orphans(say)

    def collect_orphans(self, say: Callable[[str], None] = print) -> None:
        """Remove the objects the operator made for a pipeline that no longer exists
        (ServiceAccounts, Service, RoleBinding, Secret, pods). They are garbage
        collection's to remove, which in this stack missed a ServiceAccount after a
        kube-apiserver restart: the next soak's pipeline of the same name was then
        refused its driver pods (a ServiceAccount not its own) until the run timed
        out. What is left after :data:`COLLECT_SECONDS` is deleted here, as the
        operator's message tells a user to."""
        deadline = time.monotonic() + COLLECT_SECONDS
        while (left := self._orphans()) and time.monotonic() < deadline:
            time.sleep(1.0)
        for kind, name in left:
            say(f"{kind} {name} of a deleted pipeline not garbage-collected: deleting it")
            self.kubectl("delete", kind, name, "-n", self.target.namespace, "--ignore-not-found")

    def _orphans(self) -> list[tuple[str, str]]:
        """Objects of the namespace, of the kinds the operator makes, owned by a
        StreamingPipeline that no longer exists."""
        namespace = self.target.namespace
        pipelines = json.loads(self.kubectl("get", "sp", "-n", namespace, "-o", "json") or "{}")
        alive = {item["metadata"]["uid"] for item in pipelines.get("items", [])}
        found = json.loads(self.kubectl("get", OWNED_KINDS, "-n", namespace, "-o", "json") or "{}")
        return orphans(found.get("items", []), alive)

    def standby_ready(self) -> bool:
        """A hot standby of the running spec is Ready to take over."""
        standby = (self.status() or {}).get("standby") or {}
        return standby.get("purpose") == "Failover" and standby.get("state") == "Ready"

    def driver_pod(self) -> dict[str, Any] | None:
        status = self.status() or {}
        if not status.get("driverPod"):
            return None
        try:
            pod = self.kubectl(
                "get", "pod", status["driverPod"], "-n", self.target.namespace, "-o", "json"
            )
        except KubectlError:
            return None
        return dict(json.loads(pod))


def driver_pid(layout: Layout, namespace: str, pod: str) -> int | None:
    """The pid of the running process of ``pod``, as the node agent reports it."""
    for process in control.processes(layout):
        mine = process["namespace"] == namespace and process["pod"] == pod
        if mine and process["pid"] and process.get("exit_code") is None:
            return int(process["pid"]) if procs.pid_alive(int(process["pid"])) else None
    return None


def nodes_ready(layout: Layout) -> bool:
    """Every node of the stack's agent Ready, as the API server sees it."""
    return registry.server(nodeagent.NAME).probe(layout) is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def orphans(items: list[dict[str, Any]], alive: set[str]) -> list[tuple[str, str]]:
    """``(kind, name)`` of each of ``items`` owned by a StreamingPipeline whose uid is
    not in ``alive`` (a pure function)."""
    return [
        (str(item["kind"]).lower(), str(item["metadata"]["name"]))
        for item in items
        if any(
            o.get("kind") == names.KIND and o.get("uid") not in alive
            for o in item["metadata"].get("ownerReferences") or ()
        )
    ]
