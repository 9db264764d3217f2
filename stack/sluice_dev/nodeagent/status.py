"""Pod status as a kubelet reports it, built from what the agent saw locally.

Pure: the agent gives the containers' views and the times, this module answers the
phase, the conditions and the ``status`` patch. The patch is a strategic merge patch:
``conditions`` merge by type (the scheduler's PodScheduled and a controller's
DisruptionTarget survive); ``containerStatuses`` is replaced whole, and so is
``podIPs`` (``$patch: replace``): merged by ``ip``, a pod reported with 127.0.0.1 by
an agent of before per-pod IPs would end with two IPs of one family, which the API
server refuses (422), so its status could never be written again.

Phase, following the kubelet: a container never started -> Pending; one running, or
waiting to be restarted -> Running; all terminated -> Succeeded if every exit code is 0,
else Failed. Readiness probes are not run: a running container is ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sluice_dev.nodeagent.clock import rfc3339

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
TERMINAL = frozenset({SUCCEEDED, FAILED})
MAX_MESSAGE = 4096
"""The kubelet's limit on a termination message, in bytes."""


@dataclass(frozen=True)
class Waiting:
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Running:
    started_at: datetime


@dataclass(frozen=True)
class Terminated:
    exit_code: int
    started_at: datetime
    finished_at: datetime
    message: str = ""
    reason: str = ""
    """Empty: ``Completed`` for exit code 0, else ``Error``."""

    @property
    def why(self) -> str:
        return self.reason or ("Completed" if self.exit_code == 0 else "Error")


State = Waiting | Running | Terminated


@dataclass(frozen=True)
class ContainerView:
    """One container as the agent sees it; ``pid`` names the current process."""

    name: str
    image: str
    state: State
    last: Terminated | None = None
    restarts: int = 0
    pid: int | None = None


@dataclass(frozen=True)
class Condition:
    status: str
    since: datetime
    reason: str = ""
    message: str = ""


def phase(views: Sequence[ContainerView]) -> str:
    if any(isinstance(v.state, Waiting) and v.last is None for v in views):
        return PENDING
    if any(not isinstance(v.state, Terminated) for v in views):
        return RUNNING
    if all(isinstance(v.state, Terminated) and v.state.exit_code == 0 for v in views):
        return SUCCEEDED
    return FAILED


def conditions(
    views: Sequence[ContainerView], prior: Mapping[str, Condition], now: datetime
) -> dict[str, Condition]:
    """Initialized, ContainersReady and Ready; a transition time moves only on change."""
    current = phase(views)
    unready = [v.name for v in views if not isinstance(v.state, Running)]
    if not unready:
        ready = ("True", "", "")
    elif current in TERMINAL:
        ready = ("False", "PodCompleted", "")
    else:
        ready = (
            "False",
            "ContainersNotReady",
            f"containers with unready status: [{' '.join(unready)}]",
        )
    wanted = {
        "Initialized": ("True", "", ""),
        "ContainersReady": ready,
        "Ready": ready,
    }
    result: dict[str, Condition] = {}
    for kind, (status, reason, message) in wanted.items():
        before = prior.get(kind)
        since = before.since if before is not None and before.status == status else now
        result[kind] = Condition(status, since, reason, message)
    return result


def status_patch(
    views: Sequence[ContainerView],
    conds: Mapping[str, Condition],
    start_time: datetime,
    host_ip: str,
    pod_ip: str,
) -> dict[str, Any]:
    """The strategic merge patch for a pod's ``status`` subresource."""
    return {
        "status": {
            "phase": phase(views),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"$patch": "replace"}, {"ip": pod_ip}],
            "startTime": rfc3339(start_time),
            "conditions": [_condition(kind, c) for kind, c in conds.items()],
            "containerStatuses": [_container(v) for v in views],
        }
    }


def digest(status: Mapping[str, Any]) -> tuple[object, ...]:
    """The parts of a ``status`` (as JSON) that decide whether it needs re-sending."""
    conds = sorted(
        (c.get("type"), c.get("status"))
        for c in status.get("conditions") or ()
        if c.get("type") in ("Initialized", "ContainersReady", "Ready")
    )
    containers = sorted(
        (
            c.get("name"),
            tuple(sorted(k for k, v in (c.get("state") or {}).items() if v)),
            c.get("restartCount"),
            ((c.get("state") or {}).get("terminated") or {}).get("exitCode"),
        )
        for c in status.get("containerStatuses") or ()
    )
    return (status.get("phase"), status.get("podIP"), tuple(conds), tuple(containers))


def truncate(message: str) -> str:
    data = message.encode()
    return message if len(data) <= MAX_MESSAGE else data[-MAX_MESSAGE:].decode(errors="ignore")


def _condition(kind: str, cond: Condition) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": kind,
        "status": cond.status,
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(cond.since),
        "reason": cond.reason or None,
        "message": cond.message or None,
    }
    return out


def _container(view: ContainerView) -> dict[str, Any]:
    running = isinstance(view.state, Running)
    out: dict[str, Any] = {
        "name": view.name,
        "image": view.image,
        "imageID": "",
        "ready": running,
        "started": running,
        "restartCount": view.restarts,
        "state": _state(view.state),
        "lastState": _state(view.last) if view.last else {},
    }
    if view.pid is not None:
        out["containerID"] = container_id(view.pid)
    return out


def container_id(pid: int) -> str:
    """``sluice://<pid>``: the container id names the local process."""
    return f"sluice://{pid}"


def _state(state: State) -> dict[str, Any]:
    """One of waiting/running/terminated, the others null (a merge must not keep them)."""
    return {"waiting": None, "running": None, "terminated": None, **_one_state(state)}


def _one_state(state: State) -> dict[str, Any]:
    if isinstance(state, Waiting):
        body: dict[str, Any] = {"reason": state.reason}
        if state.message:
            body["message"] = state.message
        return {"waiting": body}
    if isinstance(state, Running):
        return {"running": {"startedAt": rfc3339(state.started_at)}}
    body = {
        "exitCode": state.exit_code,
        "reason": state.why,
        "startedAt": rfc3339(state.started_at),
        "finishedAt": rfc3339(state.finished_at),
    }
    if state.message:
        body["message"] = truncate(state.message)
    return {"terminated": body}
