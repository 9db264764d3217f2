"""A node whose pods are hostile drivers, many of them, for the operator-attention
test: registered and kept Ready as a kubelet keeps a Node (``nodeagent.node``: status
and Lease heartbeats), with the pods meant for it bound to it (the scheduler places
about one a second under a thousand new pods) and marked Running at the address
:func:`hostile_drivers.address` gives their pipeline, where one process
(``hostile_drivers``) misbehaves for all of them.

Why not the node agent: it runs a process per pod, and a thousand stand-in drivers
would take gigabytes. What the operator sees is the same: pods Running on a Ready
node, at an address whose ``/metrics`` and control port are the tenant's. A pod being
deleted is removed at once (grace 0), as a kubelet does once its container is gone.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import watch
from kubernetes.client import CoordinationV1Api, CoreV1Api, V1Binding, V1Lease
from kubernetes.client.exceptions import ApiException

from sluice_api.names import LABEL_PIPELINE
from sluice_dev.nodeagent import node
from sluice_dev.nodeagent.clock import micro, rfc3339
from sluice_dev.nodeagent.podnet import HOST_IP
from sluice_dev.paths import REPO_ROOT
from tests.support import hostile_drivers
from tests.support.agents import ISOLATION_TAINT, isolation_toleration

POOL_LABEL = "sluice.dev/pool"
HEARTBEAT_SECONDS = 5.0
TIMEOUT = 30.0
"""For each API call: a call lost to an overloaded API server is retried by the next
event of its pod, not waited on forever."""
CAPACITY = {"cpu": "4000", "memory": "4000Gi", "pods": "5000", "ephemeral-storage": "20Ti"}
"""Room for thousands of driver pods (each asks one core, its memory and 2Gi scratch)."""


@dataclass
class HostileNode:
    core: CoreV1Api
    coord: CoordinationV1Api
    name: str
    namespace: str
    counts_file: Path
    server: subprocess.Popen[bytes] | None = None
    marked: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def selector(self) -> dict[str, str]:
        return {POOL_LABEL: self.name}

    def toleration(self) -> dict[str, str]:
        """Only pods that tolerate the node's taint are placed there."""
        return isolation_toleration(self.name)

    def register(self) -> None:
        taint = {"key": ISOLATION_TAINT, "value": self.name, "effect": "NoSchedule"}
        uid = node.register(self.core, self.name, (taint,), self.selector)
        self._since = datetime.now(UTC)
        self._uid = uid
        self._beat()

    def _beat(self) -> None:
        moment = datetime.now(UTC)
        patch = node.status_patch(self.name, self._since, moment)
        patch["status"]["capacity"] = patch["status"]["allocatable"] = dict(CAPACITY)
        self.core.patch_node_status(self.name, patch, _content_type=node.STRATEGIC)
        renew = {"spec": {"holderIdentity": self.name, "renewTime": micro(moment)}}
        try:
            self.coord.patch_namespaced_lease(
                self.name, node.LEASE_NAMESPACE, renew, _content_type=node.MERGE
            )
        except ApiException as err:
            if err.status != 404:
                raise
            body = node.lease_body(self.name, self._uid)
            self.coord.create_namespaced_lease(node.LEASE_NAMESPACE, V1Lease.model_validate(body))

    def heartbeats(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            with contextlib.suppress(Exception):  # the next beat tries again
                self._beat()

    def kubelet(self) -> None:
        """Marks the pods bound here Running at their pipeline's hostile address (on a
        few threads: a thousand pods arrive at once)."""
        with ThreadPoolExecutor(8) as pool:
            self._watch(pool)

    def _watch(self, pool: ThreadPoolExecutor) -> None:
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    self.core.list_namespaced_pod, self.namespace, timeout_seconds=30
                ):
                    if self._stop.is_set():
                        break
                    pool.submit(self._settle, event["object"])
            except Exception:  # a dropped watch: watch again
                if self._stop.wait(1):
                    return
            finally:
                stream.stop()

    def _settle(self, pod: Any) -> None:
        with contextlib.suppress(ApiException):
            self._mark(pod)

    def _mark(self, pod: Any) -> None:
        meta = pod.metadata
        if pod.spec.node_name is None and (pod.spec.node_selector or {}) == self.selector:
            self._bind(meta.name)  # the scheduler's job, done here: it places ~1 pod/s
            return
        if pod.spec.node_name != self.name:
            return
        if meta.deletion_timestamp is not None:
            self.core.delete_namespaced_pod(
                meta.name, self.namespace, grace_period_seconds=0, _request_timeout=TIMEOUT
            )
            return
        if meta.name in self.marked or (pod.status and pod.status.pod_ip):
            return
        index = hostile_drivers.index_of((meta.labels or {}).get(LABEL_PIPELINE, ""))
        if index is None:
            return
        self.core.patch_namespaced_pod_status(
            meta.name, self.namespace, running(pod, index), _request_timeout=TIMEOUT
        )
        self.marked.add(meta.name)

    def _bind(self, pod: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, "namespace": self.namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.name},
        }
        self.core.create_namespaced_pod_binding(
            pod,
            self.namespace,
            V1Binding.model_validate(binding),
            _preload_content=False,
            _request_timeout=TIMEOUT,
        )

    def turn_hostile(self) -> None:
        """The drivers, well-behaved until now, misbehave from here on."""
        assert self.server is not None
        assert self.server.stdin is not None
        self.server.stdin.write(b"hostile\n")
        self.server.stdin.flush()

    def stop(self) -> None:
        self._stop.set()


def running(pod: Any, index: int) -> dict[str, Any]:
    """The status a kubelet posts for a pod whose one container started."""
    now = rfc3339(datetime.now(UTC))
    ip = hostile_drivers.address(index)
    container = pod.spec.containers[0]

    def condition(kind: str) -> dict[str, str]:
        return {"type": kind, "status": "True", "lastTransitionTime": now}

    return {
        "status": {
            "phase": "Running",
            "hostIP": HOST_IP,
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "conditions": [condition(c) for c in ("Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [
                {
                    "name": container.name,
                    "image": container.image,
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
    }


@contextlib.contextmanager
def hostile_node(
    core: CoreV1Api, coord: CoordinationV1Api, name: str, namespace: str, count: int, workdir: Path
) -> Iterator[HostileNode]:
    """The node ``name`` and ``count`` hostile drivers' addresses, for the pipelines
    ``hostile-0`` to ``hostile-<count-1>`` of ``namespace``; all gone afterwards."""
    counts = workdir / "hostile-counts.json"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.hostile_drivers", str(count), namespace, str(counts)],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(workdir / "hostile-drivers.log").open("wb"),
    )
    hostile = HostileNode(core, coord, name, namespace, counts, server)
    threads: list[threading.Thread] = []
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.strip() == b"listening", (workdir / "hostile-drivers.log").read_text()
        hostile.register()
        threads = [
            threading.Thread(target=hostile.heartbeats, daemon=True),
            threading.Thread(target=hostile.kubelet, daemon=True),
        ]
        for thread in threads:
            thread.start()
        yield hostile
    finally:
        hostile.stop()
        for thread in threads:
            thread.join(40)
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        with contextlib.suppress(ApiException):
            core.delete_node(name)
