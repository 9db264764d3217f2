"""The fault injectors: each does one kind of damage to the running system and says
when it began and when it was over (see :mod:`.recovery` for what the run does with
that). A fault that needs undoing after recovery (a partitioned or crashed node healed) returns
that step too.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from sluice_dev import stack
from sluice_dev.kubectl import Kubectl
from sluice_dev.nodeagent import control
from sluice_dev.paths import Layout
from sluice_dev.soak import cluster
from sluice_dev.soak.manifest import manifest
from sluice_dev.soak.recovery import Fault
from sluice_dev.soak.schedule import FaultKind, Step

CASSANDRA_DOWN_SECONDS: Final = 20.0
Wait = Callable[[Callable[[], object], str, float], object]
Undo = Callable[[], None]
Action = Callable[[], tuple[str, Undo | None]]


@dataclass(frozen=True)
class Injected:
    fault: Fault
    undo: Callable[[], None] | None = None
    """Run once the fault has recovered (heal a partitioned node)."""


@dataclass
class Chaos:
    layout: Layout
    kubectl: Kubectl
    pipeline: cluster.Pipeline
    operator: cluster.Operator
    images: tuple[str, ...]
    wait: Wait
    standby: int = 0
    low_latency: bool = False

    def inject(self, step: Step) -> Injected:
        status = self.pipeline.status() or {}
        epoch = int(status.get("epoch") or 0)
        actions: dict[FaultKind, Action] = {
            FaultKind.POD_DELETE: self._delete_pod,
            FaultKind.DRIVER_KILL: self._kill_driver,
            FaultKind.OPERATOR_KILL: self._kill_operator,
            FaultKind.CASSANDRA_STOP: lambda: self._restart("cassandra", CASSANDRA_DOWN_SECONDS),
            FaultKind.KAFKA_RESTART: lambda: self._restart("kafka", 0.0),
            FaultKind.APISERVER_RESTART: lambda: self._restart("kube-apiserver", 0.0),
            FaultKind.NODE_PARTITION: self._partition,
            FaultKind.NODE_CRASH: self._crash,
            FaultKind.SPEC_CHANGE: lambda: self._change_image(str(status.get("image") or "")),
        }
        started = time.time()
        note, undo = actions[step.kind]()
        cleared = started if step.kind.replaces_driver else time.time()
        return Injected(Fault(step.number, step.kind, started, cleared, epoch, note), undo)

    def _driver(self) -> tuple[str, str]:
        pod = self.pipeline.driver_pod()
        if pod is None:
            raise RuntimeError("no driver pod to hit: the pipeline has no driverPod")
        return str(pod["metadata"]["name"]), str(pod["spec"].get("nodeName") or "")

    def _delete_pod(self) -> tuple[str, None]:
        name, node = self._driver()
        namespace = self.pipeline.target.namespace
        self.kubectl("delete", "pod", name, "-n", namespace, "--force", "--grace-period=0")
        return f"pod {name} on {node}", None

    def _kill_driver(self) -> tuple[str, None]:
        name, node = self._driver()
        namespace = self.pipeline.target.namespace
        pid = self.wait(
            lambda: cluster.driver_pid(self.layout, namespace, name),
            f"the node agent's process of driver pod {name}",
            60,
        )
        assert isinstance(pid, int)
        os.kill(pid, signal.SIGKILL)
        return f"pid {pid} of {name} on {node}", None

    def _kill_operator(self) -> tuple[str, None]:
        pid = self.operator.pid()
        self.operator.kill()
        self.operator.start()
        return f"pid {pid}, back as {self.operator.pid()}", None

    def _restart(self, server: str, down: float) -> tuple[str, None]:
        seconds = stack.restart(self.layout, server, down_seconds=down, say=lambda _line: None)
        return f"{server} healthy again after {seconds:.1f}s", None

    def _partition(self) -> tuple[str, Callable[[], None]]:
        name, node = self._driver()
        control.partition(self.layout, node)
        return f"node {node} (driver {name} left running there)", self._healing(node)

    def _crash(self) -> tuple[str, Callable[[], None]]:
        name, node = self._driver()
        control.crash(self.layout, node)
        return f"node {node} (driver {name} killed with it)", self._healing(node)

    def _healing(self, node: str) -> Callable[[], None]:
        """Undo a partition or a crash of ``node``, once the fault has been measured."""

        def heal() -> None:
            control.heal(self.layout, node)
            self.wait(lambda: cluster.nodes_ready(self.layout), f"node {node} Ready again", 120)

        return heal

    def _change_image(self, current: str) -> tuple[str, None]:
        image = next((i for i in self.images if i != current), self.images[0])
        pipeline = manifest(self.pipeline.target, image, self.standby, low_latency=self.low_latency)
        self.kubectl.apply(pipeline)
        return f"{current} -> {image}", None
