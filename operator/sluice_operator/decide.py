"""The lifecycle rules: from what is observed to what must be done.

A purely computational function with no side effects; ``reconcile`` observes the
pipeline, its driver pods and their nodes, calls :func:`decide`, and applies the
returned actions in order. Rules, in the order they are checked:

* deleted or suspended: stop the driver cleanly (it commits and exits 0); a driver
  on a lost node is removed at once (it is fenced if it ever runs again);
* no driver: start one with the next epoch, unless a restart back-off is pending
  or the pipeline Failed and its spec has not changed since;
* the driver exited: 0 → start the next (the spec changed, or it stopped by itself);
  2 → Failed with the driver's message (or a rollback); 3 → it was fenced, start a newer one;
  anything else → back-off, then restart; Failed after ``maxFailures`` in a row;
* the driver's node is lost for ``failover.nodeLostSeconds``: start a new driver
  elsewhere first, then remove the old pod object;
* a Ready hot standby takes over (``handover.promote``) when the driver's pod ended,
  is gone, its node is lost, or the driver has not been connected to for
  ``hot_standby.SILENT_SECONDS`` (a crashed node: its pod still says Running);
* the spec changed in a field the driver reads: clean stop, then a new driver; with
  ``upgrade.mode: WarmHandover`` the new driver starts first as a standby, and only
  once it is ready is the old one stopped (``handover.with_standby``);
* the pod of the driver is not running ``restart.startDeadlineSeconds`` after its
  creation, or the API server refused it: a failure, as an exit is;
* the driver of a changed spec gave up (or exited 2): run the last good spec again
  (``rollback``).

A warm handover: the standby's epoch is written (``status.standby``) before its pod
exists; while it starts the running driver goes on; once it reports ready the old
driver is stopped cleanly and, when it has exited (or its node is lost), the standby
becomes the current driver (``handover.promote``). A standby that exits or is not
ready within ``restart.startDeadlineSeconds`` is removed and the upgrade reported
failed (``UpgradeFailed``); the same spec is not tried again, a changed one is.
Epochs are never reused: the next is above the current driver's and any standby's.

Every new epoch is written to the status before its pod is created, so an operator
restarted at any instant resumes from the status alone. The phase comes from
``lifecycle``; what the running driver reports (``reports``), a pod that does not
start (``starting``) and the conditions (``conditions``) have their own modules, and so
do the parts of the cases below: the platform's settings (``settings``), the steps
every rule takes (``steps``), what keeps a driver from starting (``refusals``),
starting the next driver (``launch``), failures, back-off and rollback
(``failures``), the status of a driver that runs (``running``) and the standbys of a
warm handover or a hot standby (``handover``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sluice_api import termination
from sluice_api.exitcodes import ExitCode
from sluice_api.replacement import UpgradeMode
from sluice_api.spec import PipelineSpec
from sluice_operator import (
    failures,
    handover,
    hot_standby,
    launch,
    refusals,
    rollback,
    running,
    starting,
    steps,
    understood,
)
from sluice_operator.actions import Action, Decision, Emit, Promote, RemovePod, StopPod, WriteStatus
from sluice_operator.conditions import set_condition, with_ready
from sluice_operator.lifecycle import Seen
from sluice_operator.model import (
    Observed,
    Phase,
    PodView,
    Standby,
    StandbyPurpose,
    Status,
    StopReason,
)
from sluice_operator.progress import DriverProgress
from sluice_operator.settings import DEFAULTS, Settings

EXIT_CLEAN, EXIT_CONFIG, EXIT_FENCED = ExitCode.CLEAN_STOP, ExitCode.INVALID_CONFIG, ExitCode.FENCED


def decide(obs: Observed, settings: Settings = DEFAULTS) -> Decision:
    if obs.spec is None:
        return _invalid(obs)
    obs = rollback.effective(obs, obs.spec)
    spec = obs.spec
    assert spec is not None
    current = next((p for p in obs.pods if p.name == obs.status.driver_pod), None)
    settled, kept, told = handover.settle_standby(obs, spec, current)
    decision = _decide(settled, spec, current, kept, told, settings)
    if settled.status != obs.status and not any(
        isinstance(a, WriteStatus) for a in decision.actions
    ):  # the standby's record moved on, and nothing else changed
        decision = replace(decision, actions=(*decision.actions, WriteStatus(settled.status)))
    return understood.with_condition(settled, decision)


def _decide(
    obs: Observed,
    spec: PipelineSpec,
    current: PodView | None,
    kept: Standby | None,
    told: list[Action],
    settings: Settings,
) -> Decision:
    standby_pod = next((p for p in obs.pods if kept and p.name == kept.pod), None)
    others = [p for p in obs.pods if p is not current and p is not standby_pod]
    actions = [*told, *_cleanup(others, obs)]
    if obs.deleting:
        return _stop(obs, spec, current, StopReason.DELETE, actions, settings)
    if spec.suspend:
        return _stop(obs, spec, current, StopReason.SUSPEND, actions, settings)
    if obs.consent_rechecked and current is not None and not current.terminated:
        refused = refusals.refusal(obs, spec, settings)
        if refused is not None:
            return refusals.consent_withdrawn(obs, current, refused, actions, settings)
    handing_over = kept is not None and hot_standby.promotable(kept, standby_pod)
    if (
        kept is not None
        and handing_over
        and (
            current is None
            or current.terminated
            or steps.node_lost(obs, spec, current)
            or hot_standby.silent(obs, spec, kept, current)
        )
    ):
        return handover.promote(obs, spec, current, kept, actions, settings)
    if current is None:
        return _without_driver(obs, spec, actions, settings)
    if current.terminated:
        return _after_exit(obs, spec, current, actions, settings)
    return _while_running(obs, spec, current, actions, settings)


# -- the cases ---------------------------------------------------------------------


def _stop(
    obs: Observed,
    spec: PipelineSpec,
    current: PodView | None,
    reason: StopReason,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    alive = [p for p in obs.pods if not p.terminated]
    status = obs.status
    if current is not None and not current.terminated:
        if steps.node_lost(obs, spec, current):
            actions.append(RemovePod(current.name))
        elif not current.deleting:
            actions.append(StopPod(current.name))
            actions.append(Emit("Normal", "Stopping", f"stopping {current.name} ({reason})"))
        status = replace(status, phase=steps.after(obs, Seen.STOP_ASKED), stop_reason=reason)
    elif alive:
        status = replace(status, phase=steps.after(obs, Seen.STOP_ASKED), stop_reason=reason)
    elif reason is StopReason.DELETE:
        return Decision((*actions, *steps.write(obs, status)), finished=True)
    else:
        if current is not None:
            status = steps.note_exit(status, current)
        status = replace(
            status, phase=steps.after(obs, Seen.STOPPED), driver_pod=None, stop_reason=None
        )
        if obs.status.phase is not Phase.SUSPENDED:
            actions.append(Emit("Normal", "Suspended", "driver stopped; pipeline suspended"))
    status = with_ready(status, obs)
    return Decision(
        (*actions, *steps.write(obs, status)), settings.requeue_seconds if alive else None
    )


def _without_driver(
    obs: Observed, spec: PipelineSpec, actions: list[Action], settings: Settings
) -> Decision:
    status = obs.status
    if status.phase is Phase.FAILED and status.observed_generation == obs.generation:
        return Decision(tuple(actions))
    if status.phase is Phase.FAILED:
        status = replace(status, failures=0, next_start_at=None, message="")
    if status.next_start_at:
        wait = (datetime.fromisoformat(status.next_start_at) - obs.now).total_seconds()
        if wait > 0:
            return Decision(tuple(actions), requeue_after=wait)
    if status.stop_reason is StopReason.UPGRADE:
        seen = Seen.STOPPED_FOR_UPGRADE
    elif status.epoch == 0:
        seen = Seen.NEVER_STARTED
    else:
        seen = Seen.DRIVER_GONE
    return launch.start(obs, spec, status, steps.after(obs, seen), actions, settings)


def _after_exit(
    obs: Observed, spec: PipelineSpec, pod: PodView, actions: list[Action], settings: Settings
) -> Decision:
    status = steps.note_exit(obs.status, pod)
    message = termination.parse(pod.message)
    said = message.message if message else ""
    code = pod.exit_code
    if code == EXIT_CLEAN:
        upgrading = status.stop_reason is StopReason.UPGRADE or steps.changed(status, spec)
        phase = steps.after(obs, Seen.STOPPED_FOR_UPGRADE if upgrading else Seen.EXITED_CLEAN)
        if not upgrading:
            status = replace(status, restarts=status.restarts + 1)
        return launch.start(obs, spec, status, phase, [*actions, RemovePod(pod.name)], settings)
    if code == EXIT_CONFIG:
        text = said or pod.message or "invalid configuration"
        if rollback.may_roll_back(obs, spec, status):  # an upgrade the driver refuses: at once
            return failures.roll_back(
                obs, spec, status, f"{pod.name} exited 2: {text}", actions, settings
            )
        failed = replace(
            status, phase=steps.after(obs, Seen.EXITED_INVALID), driver_pod=None, message=text
        )
        failed = replace(failed, observed_generation=obs.generation)
        return Decision(
            (
                *actions,
                Emit("Warning", "InvalidConfig", text),
                *steps.write(obs, with_ready(failed, obs)),
            )
        )
    if code == EXIT_FENCED:
        floor = (message.held_by_epoch if message else None) or 0
        status = replace(status, restarts=status.restarts + 1)
        actions += [Emit("Warning", "Fenced", f"{pod.name} was fenced by a newer epoch")]
        phase = steps.after(obs, Seen.EXITED_FENCED)
        return launch.start(obs, spec, status, phase, actions, settings, epoch_floor=floor)
    return failures.failed(obs, spec, status, pod, said or pod.message, actions, settings)


def _while_running(
    obs: Observed, spec: PipelineSpec, pod: PodView, actions: list[Action], settings: Settings
) -> Decision:
    status = obs.status
    if steps.node_lost(obs, spec, pod):
        message = f"node {pod.node} of {pod.name} lost for {spec.failover.node_lost_seconds}s"
        status = replace(status, restarts=status.restarts + 1)
        status = replace(
            status,
            conditions=set_condition(status, "Fenced", "True", "NodeLost", message, obs),
        )
        decision = launch.start(
            obs,
            spec,
            status,
            steps.after(obs, Seen.NODE_LOST),
            [*actions, Emit("Warning", "NodeLost", message)],
            settings,
        )
        return replace(decision, actions=(*decision.actions, RemovePod(pod.name)))
    if pod.deleting:
        upgrade = status.stop_reason is StopReason.UPGRADE
        phase = steps.after(obs, Seen.UPGRADE_STOPPING if upgrade else Seen.DRIVER_STOPPING)
        return Decision(
            (*actions, *steps.write(obs, replace(status, phase=phase))), settings.requeue_seconds
        )
    overdue = starting.overdue(obs, spec, pod)
    if overdue is not None:
        return failures.count_failure(
            obs, spec, status, overdue, [*actions, RemovePod(pod.name)], settings
        )
    standby = status.standby
    if standby is not None and standby.live and not standby.hot:
        return handover.with_standby(obs, spec, pod, standby, actions, settings)
    if standby is not None and standby.live:
        status, told = handover.with_hot_standby(obs, spec, standby, settings)
        actions += told
    warm = spec.upgrade.mode is UpgradeMode.WARM_HANDOVER and pod.phase.value == "Running"
    if steps.changed(status, spec) and warm:
        return handover.start_standby(obs, spec, pod, actions, settings)
    if not steps.changed(status, spec) and handover.upgrade_failed(status):  # the spec went back
        reverted = "the spec is the running driver's again"
        conditions = set_condition(
            status, handover.UPGRADE_FAILED, "False", "SpecReverted", reverted, obs
        )
        status = replace(status, conditions=conditions, message="")
    if steps.changed(status, spec):
        status = replace(
            status, phase=steps.after(obs, Seen.SPEC_CHANGED), stop_reason=StopReason.UPGRADE
        )
        actions += [
            StopPod(pod.name),
            Emit("Normal", "Upgrading", f"spec changed: stopping {pod.name} cleanly"),
        ]
        return Decision(
            (*actions, *steps.write(obs, with_ready(status, obs))), settings.requeue_seconds
        )
    return _running_steadily(obs, spec, status, pod, actions, settings)


def _running_steadily(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    pod: PodView,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    """The driver runs the spec: a promoted standby that still waits is told again, a
    hot standby is started when wanted (after its back-off, if the last one failed)."""
    report = obs.progress
    if report is not None and report.epoch == status.epoch and pod.ip and _waits(report, pod):
        # Promoted (``handover.promote``), but the promotion did not reach it yet: again.
        actions.append(Promote(pod.name, pod.ip, status.epoch))
        return running.steady(obs, status, pod, actions, settings, handover.PROMOTE_RETRY_SECONDS)
    if hot_standby.wanted(obs, spec, status, pod):
        wait = hot_standby.retry_in(spec, status.standby, obs.now)
        if wait <= 0:
            return handover.start_standby(
                replace(obs, status=status), spec, pod, actions, settings, StandbyPurpose.FAILOVER
            )
        return running.steady(obs, status, pod, actions, settings, wait)
    if hot_standby.replacement_wanted(obs, spec, status, pod):
        wait = hot_standby.retry_in(spec, status.standby, obs.now)
        if wait <= 0:
            said = hot_standby.replacement_reason(obs, spec, pod)
            started = handover.start_standby(
                replace(obs, status=status),
                spec,
                pod,
                actions,
                settings,
                StandbyPurpose.FAILOVER,
                said=said,
            )
            due = steps.until_node_lost(obs, pod)  # the next look when failover is due
            soonest = min(x for x in (started.requeue_after, due) if x is not None)
            return replace(started, requeue_after=soonest)
        return running.steady(obs, status, pod, actions, settings, wait)
    silence = hot_standby.look_again_in(obs, spec, status.standby)  # it may be gone: look soon
    if silence is None:
        silence = hot_standby.replace_in(obs, spec, status.standby)
    return running.steady(obs, status, pod, actions, settings, silence)


def _waits(report: DriverProgress, pod: PodView) -> bool:
    """The current driver, promoted from standby, has not taken its promotion: it says
    it is a ready standby, or it is a standby's pod (a control port) that reports its
    epoch and has not claimed. A promotion sent before its control port listened (a
    replacement promoted while its process started) was lost: at load 20 one waited
    for its whole warm-up, 98.9 s, before a ready standby's promotion was sent again."""
    return report.standby_ready or (pod.control and not report.claimed)


def _invalid(obs: Observed) -> Decision:
    status = replace(
        obs.status,
        phase=steps.after(obs, Seen.INVALID_SPEC),
        message=f"invalid spec: {obs.spec_error}",
        observed_generation=obs.generation,
    )
    actions: list[Action] = [
        StopPod(p.name) for p in obs.pods if not p.terminated and not p.deleting
    ]
    return Decision((*actions, *steps.write(obs, with_ready(status, obs))), finished=obs.deleting)


def _cleanup(others: list[PodView], obs: Observed) -> list[Action]:
    """Older drivers: remove the finished ones (keeping the newest for inspection),
    stop a running one, remove one whose node is lost. A standby that is no longer
    wanted (its epoch above the current one: it was never promoted, so it never
    claimed and has no batch in flight) is removed at once, not asked to finish."""
    actions: list[Action] = []
    finished = sorted((p for p in others if p.terminated), key=lambda p: p.epoch)
    actions += [RemovePod(p.name) for p in finished[:-1]]
    for pod in others:
        if pod.terminated or obs.spec is None:
            continue
        if steps.node_lost(obs, obs.spec, pod) or pod.epoch > obs.status.epoch:
            actions.append(RemovePod(pod.name))
        elif not pod.deleting:
            actions.append(StopPod(pod.name))
    return actions
