"""A driver pod that does not start: the reason the kubelet or the scheduler gives
(said once, in the ``DriverStarted`` condition and an Event), and the start deadline
after which it counts as a failure."""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from sluice_api.spec import PipelineSpec
from sluice_operator.actions import Emit
from sluice_operator.conditions import says, set_condition
from sluice_operator.model import Observed, PodPhase, PodView, Status


def overdue(obs: Observed, spec: PipelineSpec, pod: PodView) -> str | None:
    """Why the driver counts as failed to start: not running
    ``restart.startDeadlineSeconds`` after its pod was created; None otherwise."""
    if pod.phase is not PodPhase.PENDING or pod.created_at is None or pod.deleting:
        return None
    deadline = spec.restart.start_deadline_seconds
    if (obs.now - pod.created_at).total_seconds() < deadline:
        return None
    why = f"{pod.waiting}: {pod.waiting_message}" if pod.waiting else "still Pending"
    return f"{pod.name} did not start within {deadline}s ({why})"


STARTED: Final = "DriverStarted"

NOT_STARTING: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "Unschedulable",
    }
)
"""Waiting reasons that do not pass by themselves: a user must act."""


def with_start(
    status: Status, pod: PodView, obs: Observed, running: bool
) -> tuple[Status, list[Emit]]:
    """A ``DriverStarted=False`` condition and a Warning Event naming the reason when
    the driver's pod waits for something that will not come by itself (an image that
    cannot be pulled, a missing Secret, no node that fits); True again once it runs."""
    previous = next((c for c in status.conditions if c.get("type") == STARTED), None)
    if running:
        if previous is None or previous.get("status") == "True":
            return status, []
        conditions = set_condition(status, STARTED, "True", "Started", f"{pod.name} runs", obs)
        return replace(status, conditions=conditions), []
    if pod.waiting not in NOT_STARTING:
        return status, []
    message = f"{pod.name}: {pod.waiting}: {pod.waiting_message}".rstrip(": ")
    if says(previous, message):
        return status, []
    conditions = set_condition(status, STARTED, "False", pod.waiting, message, obs)
    deadline = obs.spec.restart.start_deadline_seconds if obs.spec else 0
    told = Emit("Warning", "DriverNotStarting", f"{message} (a failure {deadline}s after creation)")
    return replace(status, conditions=conditions), [told]
