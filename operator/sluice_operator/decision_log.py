"""What the operator's log says of an action it takes: what, why, and what it saw.

An on-call engineer reads the operator's log during an incident to learn why a pod
was started, stopped, promoted or removed. Every action the operator takes is told as
a Kubernetes Event (``decide``'s ``Emit``), and each Event is also one JSON log line
(``reconcile``) whose structured fields are made here: the pipeline, the action (the
Event's reason), the epoch it leads to, the reason in words, and a compact copy of the
observation the decision was made on (the drivers' pods and their nodes, the standby,
the driver's last report). Pure: values in, a dictionary out.
"""

from __future__ import annotations

from typing import Any

from sluice_operator.actions import Emit
from sluice_operator.model import Observed, PodView, Status


def fields(observed: Observed, written: Status, told: Emit) -> dict[str, Any]:
    """The log line's fields for ``told``, emitted by a decision on ``observed``
    that leads to the status ``written``."""
    return {
        "pipeline": f"{observed.namespace}/{observed.name}",
        "action": told.reason,
        "type": told.type,
        "epoch": written.epoch,
        "phase": written.phase.value,
        "reason": told.message,
        "observed": observation(observed),
    }


def observation(obs: Observed) -> dict[str, Any]:
    """What the decision saw, in a few hundred bytes: the status it started from, each
    driver pod (epoch, phase, exit code, node and whether that node is Ready,
    deletion), the standby's record and the current driver's last report."""
    seen: dict[str, Any] = {
        "phase": obs.status.phase.value,
        "epoch": obs.status.epoch,
        "driverPod": obs.status.driver_pod,
        "pods": [_pod(obs, pod) for pod in obs.pods],
    }
    standby = obs.status.standby
    if standby is not None:
        seen["standby"] = {"pod": standby.pod, "epoch": standby.epoch, "state": standby.state}
    report = obs.progress
    if report is not None:
        seen["report"] = {"epoch": report.epoch, "batchId": report.batch_id, "lag": report.lag}
    if obs.driver_silent_seconds is not None:
        seen["driverSilentSeconds"] = round(obs.driver_silent_seconds, 1)
    if obs.deleting:
        seen["deleting"] = True
    if not obs.any_node_ready:
        seen["noNodeReady"] = True
    return seen


def _pod(obs: Observed, pod: PodView) -> dict[str, Any]:
    view: dict[str, Any] = {"name": pod.name, "epoch": pod.epoch, "phase": pod.phase.value}
    if pod.exit_code is not None:
        view["exitCode"] = pod.exit_code
    if pod.node is not None:
        node = obs.nodes.get(pod.node)
        view["node"] = pod.node
        view["nodeReady"] = node.ready if node is not None else None
    if pod.deleting:
        view["deleting"] = True
    return view
