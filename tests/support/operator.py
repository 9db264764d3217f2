"""Running the real operator (``python -m sluice_operator``) against the local
control plane, and reading what it did: the pipeline's status and its driver pods."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.client import CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from sluice_api import cluster
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_operator import naming
from sluice_operator.clusterid import SYSTEM_NAMESPACE
from tests.support.agents import ISOLATION_TAINT, free_port
from tests.support.waiting import wait_for

STANDIN_ROOT = REPO_ROOT / "tests" / "support" / "standin"
STANDIN_IMAGE = "sluice-test/standin"
POD_POLICY = (
    "--allowed-node-labels=sluice.dev/pool",
    f"--allowed-toleration-keys={ISOLATION_TAINT}",
)
"""What the tests' pipelines set for placement, allowed as a platform would: their own
node pool (``sluice.dev/pool``) and its taint (``agents.ISOLATION_TAINT``); nothing else
(``sluice_operator.podpolicy``)."""


@dataclass
class OperatorProcess:
    process: subprocess.Popen[bytes]
    log: Path
    http_port: int

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def decisions(self, action: str) -> list[dict[str, Any]]:
        """The operator's log lines of ``action`` (an Event reason: ``Promoted``,
        ``DriverCreated``, ...), as the JSON objects it wrote."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("action") == action:
                found.append(entry)
        return found


@dataclass
class Operators:
    """Starts operator processes watching one namespace; stops them afterwards."""

    layout: Layout
    namespace: str
    workdir: Path
    started: list[OperatorProcess] = field(default_factory=list)

    def start(
        self, *args: str, leader_election: bool = False, pod_policy: tuple[str, ...] = POD_POLICY
    ) -> OperatorProcess:
        """An operator process with ``pod_policy`` and ``args`` added to its command line."""
        port = free_port()
        log = self.workdir / f"operator-{len(self.started) + 1}.log"
        argv = [
            sys.executable,
            "-m",
            "sluice_operator",
            f"--namespace={self.namespace}",
            f"--lease-namespace={self.namespace}",
            "--http-host=127.0.0.1",
            f"--http-port={port}",
        ]
        if not leader_election:
            argv.append("--no-leader-election")
        argv += [*pod_policy, *args]
        env = {**os.environ, "KUBECONFIG": str(self.layout.kubeconfig)}
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        operator = OperatorProcess(proc, log, port)
        self.started.append(operator)
        return operator

    def stop_all(self) -> None:
        for operator in self.started:
            operator.stop(signal.SIGKILL)


@dataclass
class Pipeline:
    """One StreamingPipeline of a test, read and changed through the API."""

    custom: CustomObjectsApi
    core: CoreV1Api
    namespace: str
    name: str

    @property
    def checkpoint_key(self) -> str:
        """The key its drivers keep their checkpoint under: the operator's cluster id
        (the UID of kube-system) with the namespace and name."""
        uid = self.core.read_namespace(SYSTEM_NAMESPACE).metadata.uid
        return cluster.checkpoint_key(uid, self.namespace, self.name)

    def create(self, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
            "kind": naming.KIND,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
        self.custom.create_namespaced_custom_object(
            naming.GROUP, naming.VERSION, self.namespace, naming.PLURAL, body
        )

    def get(self) -> dict[str, Any] | None:
        try:
            found = self.custom.get_namespaced_custom_object(
                naming.GROUP, naming.VERSION, self.namespace, naming.PLURAL, self.name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return dict(found)  # type: ignore[arg-type]

    def status(self) -> dict[str, Any]:
        found = self.get()
        return dict(found.get("status") or {}) if found else {}

    def patch_spec(self, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            naming.GROUP,
            naming.VERSION,
            self.namespace,
            naming.PLURAL,
            self.name,
            {"spec": spec},
            _content_type="application/merge-patch+json",
        )

    def delete(self) -> None:
        self.custom.delete_namespaced_custom_object(
            naming.GROUP, naming.VERSION, self.namespace, naming.PLURAL, self.name
        )

    def pods(self) -> list[Any]:
        selector = ",".join(f"{k}={v}" for k, v in naming.selector(self.name).items())
        found = self.core.list_namespaced_pod(self.namespace, label_selector=selector)
        return sorted(found.items, key=lambda p: int(p.metadata.labels[naming.LABEL_EPOCH]))

    def executor_pods(self) -> list[Any]:
        """The pipeline's executor pods (Spark's, any epoch) not being deleted."""
        selector = f"{naming.LABEL_PIPELINE}={self.name},{naming.LABEL_ROLE}={naming.ROLE_EXECUTOR}"
        found = self.core.list_namespaced_pod(self.namespace, label_selector=selector)
        return [p for p in found.items if p.metadata.deletion_timestamp is None]

    def executors_of(self, epoch: int) -> list[Any]:
        """The executor pods of the driver of ``epoch`` not being deleted."""
        return [
            p for p in self.executor_pods() if p.metadata.labels[naming.LABEL_EPOCH] == str(epoch)
        ]

    def running_executors(self, count: int, without: str = "") -> list[Any] | None:
        """``count`` running executor pods, none of them named ``without``; else None."""
        pods = [p for p in self.executor_pods() if p.status.phase == "Running"]
        if len(pods) != count or without in {p.metadata.name for p in pods}:
            return None
        return pods

    def live_pods(self) -> list[Any]:
        return [
            p
            for p in self.pods()
            if p.status.phase in (None, "Pending", "Running")
            and p.metadata.deletion_timestamp is None
        ]

    def wait_phase(
        self, phase: str, *, timeout: float = 60, epoch: int | None = None
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            status = self.status()
            if status.get("phase") == phase and (epoch is None or status.get("epoch") == epoch):
                return status
            return None

        return wait_for(reached, timeout=timeout, what=f"{self.name} phase {phase} (epoch {epoch})")


def terminated(pod: Any) -> Any:
    statuses = pod.status.container_statuses or []
    return statuses[0].state.terminated if statuses and statuses[0].state else None


def standin_spec(*, image: str = f"{STANDIN_IMAGE}:v1", **standin: Any) -> dict[str, Any]:
    """A pipeline spec whose driver is the stand-in (Kafka and Cassandra unused)."""
    return {
        "image": image,
        "source": {"kafka": {"bootstrapServers": "127.0.0.1:1", "topics": ["unused"]}},
        "transform": {
            "entrypoint": "sluice_job.examples.events:transform",
            "options": {"standin": standin},
        },
        "sink": {"cassandra": {"contactPoints": ["127.0.0.1:1"], "keyspace": "k", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["127.0.0.1:1"]}},
        "spark": {"driver": {"cores": 1, "memory": "512m"}, "executors": {"instances": 0}},
        "upgrade": {"stopTimeoutSeconds": 10},
        "failover": {"nodeLostSeconds": 5},
        "restart": {"backoffSeconds": 1, "maxBackoffSeconds": 4, "maxFailures": 5},
    }
