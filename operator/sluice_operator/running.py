"""The status of a driver that runs the spec: what it reports followed (``reports``,
``starting``), its failures in a row forgiven once it has proven itself, and when to
look again. Pure; ``decide`` and ``handover`` end each rule about a driver that runs
on here.
"""

from __future__ import annotations

from dataclasses import replace

from sluice_operator import launch, reports, starting, steps
from sluice_operator.actions import Action, Decision, Emit
from sluice_operator.conditions import with_ready
from sluice_operator.lifecycle import Seen
from sluice_operator.model import Observed, PodView, Status
from sluice_operator.settings import Settings


def steady(
    obs: Observed,
    status: Status,
    pod: PodView,
    actions: list[Action],
    settings: Settings,
    requeue_at_most: float | None = None,
) -> Decision:
    """The driver runs the spec (or its pod is pending): its phase, its reports folded
    in, its failures in a row forgotten once it has proven itself (:func:`proven`),
    and the next look, no later than ``requeue_at_most`` nor than its node's
    failover."""
    running = pod.phase.value == "Running"
    phase = steps.after(obs, Seen.DRIVER_RUNNING if running else Seen.DRIVER_PENDING)
    status = replace(status, phase=phase, observed_generation=obs.generation)
    if status.executor_secrets is None and obs.spec is not None:
        # A driver started by an operator that did not write them yet: its executors
        # would be refused until the next driver.
        status = replace(status, executor_secrets=launch.executor_secrets(obs, obs.spec))
    status = reports.with_progress(status, pod, obs, settings.progress_seconds)
    status = reports.with_good(status, pod, obs)
    status = reports.with_lag(status, pod, obs, settings.progress_seconds)
    status, told = starting.with_start(status, pod, obs, running)
    actions += told
    status, told = reports.with_dependencies(status, pod, obs)
    actions += told
    status, told = reports.with_losses(status, pod, obs)
    actions += told
    status, told = reports.with_resets(status, pod, obs)
    actions += told
    status, told = reports.with_offset_reset(status, pod, obs)
    actions += told
    if status.failures and proven(obs, pod, settings):
        status = replace(status, failures=0, message="")
    if running and status.phase is not obs.status.phase:
        actions.append(Emit("Normal", "Running", f"{pod.name} (epoch {pod.epoch}) is running"))
    status = with_ready(status, obs)
    requeue = settings.progress_seconds if running else settings.requeue_seconds
    node_wait = steps.until_node_lost(obs, pod)
    if node_wait is not None:
        requeue = min(requeue, node_wait)
    if requeue_at_most is not None:
        requeue = min(requeue, requeue_at_most)
    return Decision((*actions, *steps.write(obs, status)), requeue)


def proven(obs: Observed, pod: PodView, settings: Settings) -> bool:
    """Whether a running driver puts its pipeline's failures in a row behind it: it
    has run ``stable_seconds`` and, where it reports (its epoch's metrics read), it
    has committed a batch of its own or has nothing to read (lag 0). Time alone is
    not enough: a transform that raises on its first batch, after a Spark start
    longer than ``stable_seconds`` on a loaded node, would otherwise reset the count
    at each attempt and loop for ever without the pipeline ever becoming ``Failed``.
    A driver whose metrics cannot be read is judged by its time alone."""
    if pod.running_since is None:
        return False
    if (obs.now - pod.running_since).total_seconds() < settings.stable_seconds:
        return False
    report = obs.progress
    if report is None or report.epoch != pod.epoch:
        return True
    return bool(report.commits) or report.lag == 0
