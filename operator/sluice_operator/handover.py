"""The standbys: a second driver beside the running one.

A warm handover's standby (``upgrade.mode: WarmHandover``) runs the new spec and takes
over once the old driver has stopped cleanly; a hot standby (``spec.standby: 1``) runs
the same spec and takes over when the driver is lost (``hot_standby`` holds the rules
about it that stand on their own). Here each is started (its epoch written ahead),
watched until it is ready, settled when it is no longer wanted or has failed, and
promoted. Pure, like ``decide``.
"""

from __future__ import annotations

from dataclasses import replace

from sluice_api import termination
from sluice_api.replacement import UpgradeMode
from sluice_api.spec import PipelineSpec
from sluice_operator import builders, changes, hot_standby, launch, naming, refusals, running, steps
from sluice_operator.actions import (
    Action,
    CreatePod,
    Decision,
    Emit,
    EnsureObjects,
    Promote,
    RemovePod,
    StopPod,
    WriteStatus,
)
from sluice_operator.conditions import set_condition, with_ready
from sluice_operator.lifecycle import Seen
from sluice_operator.model import (
    Observed,
    PodView,
    Standby,
    StandbyPurpose,
    StandbyState,
    Status,
    StopReason,
)
from sluice_operator.settings import Settings

UPGRADE_FAILED = "UpgradeFailed"
"""Condition: the standby of a warm handover never became ready (True), or the spec
changed since and is being tried (False)."""


PROMOTE_RETRY_SECONDS = 1.0
"""How soon a promotion that did not reach its standby is sent again."""


def settle_standby(
    obs: Observed, spec: PipelineSpec, current: PodView | None
) -> tuple[Observed, Standby | None, list[Action]]:
    """The standby ``status.standby`` names, if it is still wanted: ``obs`` with its
    record moved on when it is not (cancelled, or failed during the handover; its pod
    is then one of the others ``decide._cleanup`` stops), and what to tell."""
    standby = obs.status.standby
    if standby is None or not standby.live:
        return obs, None, []
    if obs.consent_rechecked and (obs.secret_refusals or obs.endpoint_refusals):
        return _cancelled_standby(obs, standby, "a Secret the pipeline uses may not be used")
    pod = next((p for p in obs.pods if p.name == standby.pod), None)
    if standby.hot:
        return _settle_hot_standby(obs, spec, standby, pod, current)
    alive = current is not None and not current.terminated
    why = ""
    if obs.deleting or spec.suspend:
        why = "the pipeline is being deleted" if obs.deleting else "the pipeline is suspended"
    elif standby.state is StandbyState.READY:
        if pod is None or pod.terminated or pod.deleting:
            return _failed_standby(obs, standby, pod, "it ended during the handover")
        return obs, standby, []
    elif spec.upgrade.mode is not UpgradeMode.WARM_HANDOVER:
        why = "spec.upgrade.mode is no longer WarmHandover"
    elif standby.spec_hash != changes.spec_hash(spec):
        why = "the spec changed again"
    elif not alive:
        why = "the running driver ended before the standby was ready"
    if not why:
        return obs, standby, []
    return _cancelled_standby(obs, standby, why)


def _cancelled_standby(
    obs: Observed, standby: Standby, why: str
) -> tuple[Observed, None, list[Action]]:
    cancelled = replace(standby, state=StandbyState.CANCELLED, message=why)
    told = Emit("Normal", "StandbyCancelled", f"standby {standby.pod} cancelled: {why}")
    return replace(obs, status=replace(obs.status, standby=cancelled)), None, [told]


def _settle_hot_standby(
    obs: Observed,
    spec: PipelineSpec,
    standby: Standby,
    pod: PodView | None,
    current: PodView | None,
) -> tuple[Observed, Standby | None, list[Action]]:
    """A hot standby is kept while wanted and alive; one whose pod ended, is being
    deleted or is on a lost node failed (``hot_standby.failed``): the driver goes on."""
    why = hot_standby.cancel_reason(obs, spec, standby, current)
    if why:
        return _cancelled_standby(obs, standby, why)
    if pod is None and standby.state is StandbyState.STARTING:
        return obs, standby, []  # written ahead, not created yet: with_hot_standby does
    gone = ""
    if pod is None or pod.terminated:
        gone = "it ended"
    elif pod.deleting:
        gone = "its pod was deleted"
    elif steps.node_lost(obs, spec, pod):
        gone = f"its node {pod.node} is lost"
    if not gone:
        return obs, standby, []
    record, told = hot_standby.failed(standby, pod, obs.now, gone)
    return replace(obs, status=replace(obs.status, standby=record)), None, told


def _failed_standby(
    obs: Observed, standby: Standby, pod: PodView | None, why: str
) -> tuple[Observed, None, list[Action]]:
    """The upgrade failed: the standby is removed, the running driver goes on, and the
    status says why (``UpgradeFailed``) until the spec changes again."""
    message = termination.parse(pod.message) if pod is not None else None
    detail = (message.message if message else "") or (pod.message if pod else "")
    code = f" exited {pod.exit_code}" if pod is not None and pod.exit_code is not None else ""
    text = f"upgrade to {standby.image} failed: standby {standby.pod}{code}: {why}"
    if detail:
        text += f": {detail}"
    status = obs.status
    running = status.driver_pod or "the running driver"
    status = replace(
        status,
        standby=replace(standby, state=StandbyState.FAILED, message=text),
        message=text,
        conditions=set_condition(status, UPGRADE_FAILED, "True", "StandbyNotReady", text, obs),
    )
    told: list[Action] = [Emit("Warning", UPGRADE_FAILED, f"{text}; {running} keeps running")]
    if pod is not None:
        told.append(RemovePod(pod.name))
    return replace(obs, status=status), None, told


def start_standby(
    obs: Observed,
    spec: PipelineSpec,
    pod: PodView,
    actions: list[Action],
    settings: Settings,
    purpose: StandbyPurpose = StandbyPurpose.UPGRADE,
    *,
    said: str | None = None,
) -> Decision:
    """Write the standby's epoch ahead, then create its pod; the running driver goes
    on. A spec whose upgrade standby failed is not tried again (the failure stays
    reported); a hot standby is (``hot_standby.retry_in``). ``said``: why, for the
    Event (a replacement of a driver on a NotReady node)."""
    status, digest = obs.status, changes.spec_hash(spec)
    previous = status.standby
    failed = previous is not None and previous.state is StandbyState.FAILED
    hot = purpose is StandbyPurpose.FAILOVER
    if not hot and failed and previous is not None and previous.spec_hash == digest:
        return running.steady(obs, status, pod, actions, settings)
    refused = refusals.refusal(obs, spec, settings)
    if refused is not None:
        return refusals.wait_for_consent(obs, status, actions, settings, refused)
    epoch = status.highest_epoch + 1
    standby = Standby(
        naming.driver_pod(obs.name, epoch),
        epoch,
        digest,
        spec.image,
        StandbyState.STARTING,
        purpose=purpose,
        failures=hot_standby.failures_in_a_row(status) if hot else 0,
        since=obs.now.isoformat(),
    )
    # Both drivers' executors are admitted while both run (the standby starts its own).
    allowed = {*(status.executor_secrets or ()), *(launch.executor_secrets(obs, spec) or ())}
    status = replace(
        status,
        standby=standby,
        observed_generation=obs.generation,
        executor_secrets=tuple(sorted(allowed)) if allowed else None,
    )
    if not hot and any(c.get("type") == UPGRADE_FAILED for c in status.conditions):
        retrying = f"trying {spec.image} (standby {standby.pod})"
        conditions = set_condition(status, UPGRADE_FAILED, "False", "SpecChanged", retrying, obs)
        status = replace(status, conditions=conditions, message="")
    owner = launch.owner_of(obs, settings)
    said = (
        f"{said}: {standby.pod} (epoch {epoch})"
        if said
        else f"hot standby {standby.pod} (epoch {epoch}) starts beside {pod.name}"
        if hot
        else f"spec changed: {standby.pod} (epoch {epoch}, {spec.image}) starts in standby; "
        f"{pod.name} runs until it is ready"
    )
    return Decision(
        (
            *actions,
            WriteStatus(with_ready(status, obs)),
            EnsureObjects(tuple(builders.supporting(owner, spec, settings.driver_cluster_role))),
            CreatePod(builders.driver_pod(owner, spec, epoch, digest, standby=purpose)),
            Emit("Normal", "StandbyCreated", said),
        ),
        settings.requeue_seconds,
    )


def with_standby(
    obs: Observed,
    spec: PipelineSpec,
    pod: PodView,
    standby: Standby,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    """The running driver ``pod`` and its standby: wait for the standby to be ready,
    then stop ``pod`` cleanly; a standby that ends or is late fails the upgrade."""
    status = obs.status
    spare = next((p for p in obs.pods if p.name == standby.pod), None)
    if standby.state is StandbyState.READY:
        status = replace(
            status, phase=steps.after(obs, Seen.UPGRADE_STOPPING), stop_reason=StopReason.UPGRADE
        )
        actions.append(StopPod(pod.name))
        return Decision(
            (*actions, *steps.write(obs, with_ready(status, obs))), settings.requeue_seconds
        )
    if spare is None:  # written ahead, never created (an operator restarted in between)
        owner = launch.owner_of(obs, settings)
        manifest = builders.driver_pod(
            owner, spec, standby.epoch, standby.spec_hash, standby=StandbyPurpose.UPGRADE
        )
        actions.append(CreatePod(manifest))
        return running.steady(obs, status, pod, actions, settings, settings.requeue_seconds)
    late = _standby_late(obs, spec, spare)
    if spare.terminated or late:
        why = late or "it exited before it was ready"
        failed, _, told = _failed_standby(obs, standby, spare, why)
        return running.steady(obs, failed.status, pod, [*actions, *told], settings)
    report = obs.standby_progress
    if report is None or report.epoch != standby.epoch or not report.standby_ready:
        return running.steady(obs, status, pod, actions, settings, settings.requeue_seconds)
    status = replace(
        status,
        standby=replace(standby, state=StandbyState.READY),
        phase=steps.after(obs, Seen.SPEC_CHANGED),
        stop_reason=StopReason.UPGRADE,
    )
    actions += [
        StopPod(pod.name),
        Emit(
            "Normal",
            "HandingOver",
            f"standby {standby.pod} is ready: stopping {pod.name} cleanly; the standby "
            "claims the pipeline once it has released",
        ),
    ]
    return Decision(
        (*actions, *steps.write(obs, with_ready(status, obs))), settings.requeue_seconds
    )


def with_hot_standby(
    obs: Observed, spec: PipelineSpec, standby: Standby, settings: Settings
) -> tuple[Status, list[Action]]:
    """A starting hot standby: created if written ahead only, failed when late, Ready
    once it says so; the driver is not touched."""
    status = obs.status
    if standby.state is not StandbyState.STARTING:
        return status, []
    spare = next((p for p in obs.pods if p.name == standby.pod), None)
    if spare is None:  # written ahead, never created (an operator restarted in between)
        owner = launch.owner_of(obs, settings)
        manifest = builders.driver_pod(
            owner, spec, standby.epoch, standby.spec_hash, standby=StandbyPurpose.FAILOVER
        )
        return status, [CreatePod(manifest)]
    late = _standby_late(obs, spec, spare)
    if late:
        record, told = hot_standby.failed(standby, spare, obs.now, late)
        return replace(status, standby=record), told
    report = obs.standby_progress
    if report is None or report.epoch != standby.epoch or not report.standby_ready:
        return status, []
    ready = replace(standby, state=StandbyState.READY, failures=0, since=obs.now.isoformat())
    said = f"hot standby {standby.pod} (epoch {standby.epoch}) is ready to take over"
    return replace(status, standby=ready), [Emit("Normal", "StandbyReady", said)]


def upgrade_failed(status: Status) -> bool:
    """Whether ``UpgradeFailed`` holds: a warm handover's standby never got ready."""
    return any(
        c.get("type") == UPGRADE_FAILED and c.get("status") == "True" for c in status.conditions
    )


def _standby_late(obs: Observed, spec: PipelineSpec, pod: PodView) -> str | None:
    if pod.created_at is None or pod.deleting:
        return None
    deadline = spec.restart.start_deadline_seconds
    if (obs.now - pod.created_at).total_seconds() < deadline:
        return None
    waiting = f" ({pod.waiting}: {pod.waiting_message})" if pod.waiting else ""
    return f"not ready within restart.startDeadlineSeconds={deadline}s{waiting}"


def promote(
    obs: Observed,
    spec: PipelineSpec,
    current: PodView | None,
    standby: Standby,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    """The old driver has exited (or its node is lost, or, for a hot standby, its pod
    is gone or it is silent: ``hot_standby.silent``): the standby is current. An
    upgrade's claims once the pipeline is released (or fences it after the stop
    timeout); both are told to claim now (``Promote``), after the status names them:
    a hot standby waits for nothing else."""
    status = obs.status
    before = "its predecessor"
    lost = current is not None and not current.terminated and steps.node_lost(obs, spec, current)
    if current is not None:
        before = current.name
        if current.terminated:
            status = steps.note_exit(status, current)
            before += f", which exited {current.exit_code}"
        elif lost:
            before += f", whose node {current.node} is lost"
        elif obs.driver_silent_seconds is not None:
            silence = f"{current.name} on {current.node} not reached for "
            silence += f"{obs.driver_silent_seconds:.1f}s: taken for gone"
            before += f", not reached for {obs.driver_silent_seconds:.1f}s"
            actions.append(Emit("Warning", "DriverUnreachable", silence))
        actions.append(RemovePod(current.name))
    seen = Seen.DRIVER_RUNNING if standby.hot else Seen.STOPPED_FOR_UPGRADE
    status = replace(
        status,
        phase=steps.after(obs, seen),
        epoch=standby.epoch,
        driver_pod=standby.pod,
        image=standby.image,
        spec_hash=standby.spec_hash,
        stop_reason=None,
        next_start_at=None,
        standby=None,
        observed_generation=obs.generation,
        restarts=status.restarts + 1 if standby.hot else status.restarts,
    )
    if lost:
        message = (
            f"node {current.node if current else ''} lost for {spec.failover.node_lost_seconds}s"
        )
        status = replace(
            status, conditions=set_condition(status, "Fenced", "True", "NodeLost", message, obs)
        )
        actions.append(Emit("Warning", "NodeLost", message))
    status = launch.new_spec_runs(obs, status)
    if obs.spec is not None and changes.spec_hash(obs.spec) == standby.spec_hash:
        status = replace(status, executor_secrets=launch.executor_secrets(obs, obs.spec))
    said = f"{standby.pod} (epoch {standby.epoch}, {standby.image}) takes over from {before}"
    actions.append(Emit("Normal", "Promoted" if standby.hot else "HandedOver", said))
    spare = next((p for p in obs.pods if p.name == standby.pod), None)
    told: list[Action] = []
    if spare is not None and spare.ip:
        told.append(Promote(spare.name, spare.ip, standby.epoch))
    requeue = PROMOTE_RETRY_SECONDS if standby.hot else settings.requeue_seconds
    return Decision((*actions, WriteStatus(with_ready(status, obs)), *told), requeue)
