"""The local life of one pod: its containers' processes, restarts and graceful stop.

Knows nothing of the API. On every pass the agent calls :meth:`PodRun.step` with a
:data:`Planner` (podspec + images + Secrets, which may raise), reads
:meth:`PodRun.views` to build the status, and calls :meth:`PodRun.stop` on deletion.

Restart policy: ``Never`` runs each container once; ``OnFailure`` restarts a container
that exited non-zero and ``Always`` one that exited at all, after a back-off of 0.5 s
doubling up to 10 s (the kubelet's starts at 10 s; tests want it short). A pod found
already started in the API but unknown here (the agent restarted, or its node
"crashed") gets exit code 137, reason ``ContainerStatusUnknown``, then the policy.

Files per container, under the pod's directory: ``<container>/<restart>.log`` (stdout
and stderr) and ``<container>/termination-log`` (the termination message, emptied
before each start; with ``FallbackToLogsOnError`` the log's tail stands in for it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.client import V1Container, V1ContainerStatus, V1Pod

from sluice_dev.nodeagent import runtime
from sluice_dev.nodeagent.clock import now
from sluice_dev.nodeagent.images import ImageError
from sluice_dev.nodeagent.podspec import ConfigError, LaunchPlan
from sluice_dev.nodeagent.status import (
    MAX_MESSAGE,
    Condition,
    ContainerView,
    Running,
    Terminated,
    Waiting,
)

BACKOFF_START = 0.5
BACKOFF_MAX = 10.0
RETRY_AFTER_ERROR = 1.0
LOST_REASON = "ContainerStatusUnknown"
LOST_MESSAGE = "The container could not be located when the pod was terminated"


@dataclass(frozen=True)
class ContainerFiles:
    root: Path

    @property
    def termination_log(self) -> Path:
        return self.root / "termination-log"

    def log(self, restart: int) -> Path:
        return self.root / f"{restart}.log"


Planner = Callable[[V1Container, ContainerFiles], LaunchPlan]
"""Turns a container into a launch plan; raises ConfigError or ImageError."""


@dataclass
class ContainerRun:
    """One container across its restarts."""

    spec: V1Container
    files: ContainerFiles
    process: runtime.Process | None = None
    exited: Terminated | None = None
    """How the latest instance ended (its state, or lastState while restarting)."""
    previous: Terminated | None = None
    """How the instance before it ended (lastState of the latest instance)."""
    exited_pid: int | None = None
    restarts: int = 0
    waiting: Waiting = field(default_factory=lambda: Waiting("ContainerCreating"))
    restart_pending: bool = False
    not_before: float = 0.0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def reap(self, policy: str, stopping: bool, mono: float) -> None:
        """Notice the exit of the current process and schedule a restart if due."""
        if self.process is None or self.process.poll() is None:
            return
        self.exited, self.exited_pid = self._terminated(self.process), self.process.pid
        self.process = None
        self._schedule_restart(policy, stopping, mono)

    def start(self, plan: Planner, mono: float) -> None:
        if self.alive or mono < self.not_before:
            return
        if self.exited is not None and not self.restart_pending:
            return
        try:
            launch = plan(self.spec, self.files)
        except ConfigError as err:
            self._retry(Waiting("CreateContainerConfigError", str(err)), mono)
            return
        except ImageError as err:
            self._retry(_pull_failed(self.waiting, self.spec.image or "", str(err)), mono)
            return
        restarting = self.exited is not None
        restart = self.restarts + 1 if restarting else self.restarts
        self.files.root.mkdir(parents=True, exist_ok=True)
        self.files.termination_log.write_bytes(b"")
        try:
            process = runtime.start(launch, self.files.log(restart))
        except OSError as err:
            started = now()
            failed = Terminated(128, started, started, f"failed to start: {err}", "StartError")
            self._advance(restarting, restart, None, failed)
            return
        self._advance(restarting, restart, process, None)

    def adopt(self, exited: Terminated, restarts: int, policy: str, mono: float) -> None:
        """Take over a container an earlier incarnation of the node ran."""
        self.exited, self.restarts = exited, restarts
        self._schedule_restart(policy, False, mono)

    def view(self) -> ContainerView:
        name, image = self.spec.name, self.spec.image or ""
        if self.process is not None and self.process.exit_code is None:
            running = Running(self.process.started_at)
            return ContainerView(
                name, image, running, self.previous, self.restarts, self.process.pid
            )
        if self.restart_pending and self.exited is not None:
            backoff = Waiting("CrashLoopBackOff", f"back-off restarting failed container {name}")
            return ContainerView(name, image, backoff, self.exited, self.restarts)
        if self.exited is not None:
            return ContainerView(
                name, image, self.exited, self.previous, self.restarts, self.exited_pid
            )
        return ContainerView(name, image, self.waiting, None, self.restarts)

    def _advance(
        self,
        restarting: bool,
        restart: int,
        process: runtime.Process | None,
        failed: Terminated | None,
    ) -> None:
        if restarting:
            self.previous, self.restarts = self.exited, restart
        self.process, self.exited, self.restart_pending = process, failed, False
        self.exited_pid = None

    def _retry(self, waiting: Waiting, mono: float) -> None:
        if self.exited is None:
            self.waiting = waiting
        self.not_before = mono + RETRY_AFTER_ERROR

    def _schedule_restart(self, policy: str, stopping: bool, mono: float) -> None:
        assert self.exited is not None
        wanted = policy == "Always" or (policy == "OnFailure" and self.exited.exit_code != 0)
        self.restart_pending = wanted and not stopping
        if self.restart_pending:
            self.not_before = mono + min(BACKOFF_MAX, BACKOFF_START * 2**self.restarts)

    def _terminated(self, process: runtime.Process) -> Terminated:
        code = process.exit_code if process.exit_code is not None else 137
        return Terminated(
            exit_code=code,
            started_at=process.started_at,
            finished_at=process.finished_at or now(),
            message=self._message(code),
        )

    def _message(self, code: int) -> str:
        message = _tail(self.files.termination_log)
        policy = self.spec.termination_message_policy or "File"
        if not message and code != 0 and policy == "FallbackToLogsOnError":
            logs = sorted(self.files.root.glob("*.log"), key=lambda p: p.stat().st_mtime)
            message = _tail(logs[-1]) if logs else ""
        return message


class PodRun:
    """Every container of one pod, plus its pod-level bookkeeping."""

    def __init__(self, pod: V1Pod, pod_dir: Path, *, lost: bool = False) -> None:
        assert pod.spec is not None
        self.pod = pod
        self.dir = pod_dir
        self.policy = pod.spec.restart_policy or "Always"
        self.started_at = now()
        self.stopping = False
        self.kill_at: float | None = None
        self.conditions: dict[str, Condition] = {}
        self.last_patch: dict[str, object] | None = None
        self.last_sent = 0.0
        self.retry_at = 0.0
        self.containers = [
            ContainerRun(c, ContainerFiles(pod_dir / c.name)) for c in pod.spec.containers
        ]
        if lost:
            self._seed_lost(pod)

    def step(self, plan: Planner, mono: float | None = None) -> None:
        """Reap exits, kill after the grace period, (re)start what is due."""
        mono = time.monotonic() if mono is None else mono
        for container in self.containers:
            container.reap(self.policy, self.stopping, mono)
        if self.stopping:
            if self.kill_at is not None and mono >= self.kill_at:
                self.kill()
            return
        for container in self.containers:
            container.start(plan, mono)

    def reap(self) -> None:
        """Notice exits without starting anything (the node cannot reach the API)."""
        mono = time.monotonic()
        for container in self.containers:
            container.reap(self.policy, True, mono)

    def stop(self, grace: float) -> None:
        """Begin (or shorten) a graceful stop: SIGTERM now, SIGKILL after ``grace``."""
        deadline = time.monotonic() + max(grace, 0.0)
        if not self.stopping:
            self.stopping = True
            for container in self.containers:
                container.restart_pending = False
                if container.process is not None:
                    container.process.stop()
        if self.kill_at is None or deadline < self.kill_at:
            self.kill_at = deadline

    def kill(self) -> None:
        """SIGKILL every container's process group now."""
        self.stopping = True
        for container in self.containers:
            container.restart_pending = False
            if container.process is not None:
                container.process.kill()
        self.reap()

    @property
    def finished(self) -> bool:
        return not any(c.alive for c in self.containers)

    @property
    def ever_started(self) -> bool:
        return any(c.process is not None or c.exited is not None for c in self.containers)

    def views(self) -> list[ContainerView]:
        return [c.view() for c in self.containers]

    def _seed_lost(self, pod: V1Pod) -> None:
        statuses = {
            s.name: s for s in (pod.status.container_statuses if pod.status else None) or ()
        }
        mono = time.monotonic()
        for container in self.containers:
            known = statuses.get(container.spec.name)
            restarts = known.restart_count if known else 0
            container.adopt(_lost(known), restarts, self.policy, mono)
        if pod.status is not None and pod.status.start_time is not None:
            self.started_at = pod.status.start_time


def _pull_failed(before: Waiting, image: str, why: str) -> Waiting:
    """As a kubelet says it: ``ErrImagePull`` the first time, ``ImagePullBackOff``
    while it waits to try again."""
    if before.reason in ("ErrImagePull", "ImagePullBackOff"):
        return Waiting("ImagePullBackOff", f'Back-off pulling image "{image}": {why}')
    return Waiting("ErrImagePull", why)


def _lost(known: V1ContainerStatus | None) -> Terminated:
    stamp = now()
    if known is not None and known.state is not None and known.state.terminated is not None:
        t = known.state.terminated
        return Terminated(
            exit_code=t.exit_code,
            started_at=t.started_at or stamp,
            finished_at=t.finished_at or stamp,
            message=t.message or "",
            reason=t.reason or "",
        )
    started = stamp
    if known is not None and known.state is not None and known.state.running is not None:
        started = known.state.running.started_at or stamp
    return Terminated(137, started, stamp, message=LOST_MESSAGE, reason=LOST_REASON)


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - MAX_MESSAGE))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""
