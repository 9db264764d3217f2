"""The lifecycle rules: from what is observed to what must be done.

A purely computational function with no side effects; ``reconcile`` observes the
pipeline, its driver pods and their nodes, calls :func:`decide`, and applies the
returned actions in order. Rules, in the order they are checked:

* deleted or suspended: stop the driver cleanly (it commits and exits 0); a driver
  on a lost node is removed at once (it is fenced if it ever runs again);
* no driver: start one with the next epoch, unless a restart back-off is pending
  or the pipeline Failed and its spec has not changed since;
* the driver exited: 0 → start the next (the spec changed, or it stopped by itself);
  2 → Failed with the driver's message; 3 → it was fenced, start a newer one;
  anything else → back-off, then restart; Failed after ``maxFailures`` in a row;
* the driver's node is lost for ``failover.nodeLostSeconds``: start a new driver
  elsewhere first, then remove the old pod object;
* the spec changed in a field the driver reads: clean stop, then a new driver.

Every new epoch is written to the status before its pod is created, so an operator
restarted at any instant resumes from the status alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from sluice_api import termination
from sluice_api.exitcodes import ExitCode
from sluice_api.spec import PipelineSpec
from sluice_operator import builders, changes, naming
from sluice_operator.actions import (
    Action,
    CreatePod,
    Decision,
    Emit,
    EnsureObjects,
    RemovePod,
    StopPod,
    WriteStatus,
)
from sluice_operator.lifecycle import Seen, next_phase
from sluice_operator.model import (
    GoodSpec,
    Lag,
    LastCommit,
    Observed,
    Phase,
    PodPhase,
    PodView,
    Rollback,
    Status,
    StopReason,
)

EXIT_CLEAN, EXIT_CONFIG, EXIT_FENCED = ExitCode.CLEAN_STOP, ExitCode.INVALID_CONFIG, ExitCode.FENCED


@dataclass(frozen=True)
class Settings:
    requeue_seconds: float = 2.0
    """How soon to look again while something is in motion (a pod starts or stops)."""
    stable_seconds: float = 60.0
    """A driver running this long resets the count of failures in a row."""
    progress_seconds: float = 5.0
    """``status.lastCommit`` follows a running driver's commits at most this often
    (one status write per pipeline per interval, not one per batch); it is also how
    often a stable Running pipeline is looked at."""
    resync_seconds: float = 300.0
    """With nothing in motion (Failed, Suspended) a pipeline is looked at again when
    something changes, or after this long."""


DEFAULTS = Settings()


def decide(obs: Observed, settings: Settings = DEFAULTS) -> Decision:
    if obs.spec is None:
        return _invalid(obs)
    obs = _effective(obs, obs.spec)
    spec = obs.spec
    assert spec is not None
    current = next((p for p in obs.pods if p.name == obs.status.driver_pod), None)
    actions = _cleanup([p for p in obs.pods if p is not current], obs)
    if obs.deleting:
        return _stop(obs, spec, current, StopReason.DELETE, actions, settings)
    if spec.suspend:
        return _stop(obs, spec, current, StopReason.SUSPEND, actions, settings)
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
        if _node_lost(obs, spec, current):
            actions.append(RemovePod(current.name))
        elif not current.deleting:
            actions.append(StopPod(current.name))
            actions.append(Emit("Normal", "Stopping", f"stopping {current.name} ({reason})"))
        status = replace(status, phase=_after(obs, Seen.STOP_ASKED), stop_reason=reason)
    elif alive:
        status = replace(status, phase=_after(obs, Seen.STOP_ASKED), stop_reason=reason)
    elif reason is StopReason.DELETE:
        return Decision((*actions, *_write(obs, status)), finished=True)
    else:
        if current is not None:
            status = _note_exit(status, current)
        status = replace(status, phase=_after(obs, Seen.STOPPED), driver_pod=None, stop_reason=None)
        if obs.status.phase is not Phase.SUSPENDED:
            actions.append(Emit("Normal", "Suspended", "driver stopped; pipeline suspended"))
    status = _with_ready(status, obs)
    return Decision((*actions, *_write(obs, status)), settings.requeue_seconds if alive else None)


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
    return _start(obs, spec, status, _after(obs, seen), actions, settings)


def _after_exit(
    obs: Observed, spec: PipelineSpec, pod: PodView, actions: list[Action], settings: Settings
) -> Decision:
    status = _note_exit(obs.status, pod)
    message = termination.parse(pod.message)
    said = message.message if message else ""
    code = pod.exit_code
    if code == EXIT_CLEAN:
        upgrading = status.stop_reason is StopReason.UPGRADE or _changed(status, spec)
        phase = _after(obs, Seen.STOPPED_FOR_UPGRADE if upgrading else Seen.EXITED_CLEAN)
        if not upgrading:
            status = replace(status, restarts=status.restarts + 1)
        return _start(obs, spec, status, phase, [*actions, RemovePod(pod.name)], settings)
    if code == EXIT_CONFIG:
        text = said or pod.message or "invalid configuration"
        if _may_roll_back(obs, spec, status):  # an upgrade the driver refuses: at once
            return _roll_back(obs, spec, status, f"{pod.name} exited 2: {text}", actions, settings)
        failed = replace(
            status, phase=_after(obs, Seen.EXITED_INVALID), driver_pod=None, message=text
        )
        failed = replace(failed, observed_generation=obs.generation)
        return Decision(
            (
                *actions,
                Emit("Warning", "InvalidConfig", text),
                *_write(obs, _with_ready(failed, obs)),
            )
        )
    if code == EXIT_FENCED:
        floor = (message.held_by_epoch if message else None) or 0
        status = replace(status, restarts=status.restarts + 1)
        actions += [Emit("Warning", "Fenced", f"{pod.name} was fenced by a newer epoch")]
        phase = _after(obs, Seen.EXITED_FENCED)
        return _start(obs, spec, status, phase, actions, settings, epoch_floor=floor)
    return _failed(obs, spec, status, pod, said or pod.message, actions, settings)


def _failed(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    pod: PodView,
    why: str,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    text = f"{pod.name} exited {pod.exit_code}: {why}".strip()
    return _count_failure(obs, spec, status, text, actions, settings, exited=pod.name)


def _count_failure(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    text: str,
    actions: list[Action],
    settings: Settings,
    *,
    exited: str | None = None,
    min_delay: int = 0,
) -> Decision:
    """One more failure in a row: Failed at ``restart.maxFailures``, else a restart
    after :func:`restart_delay` (at least ``min_delay``). ``exited`` names the pod of
    a driver that exited, removed when its successor starts."""
    failures = status.failures + 1
    if failures >= spec.restart.max_failures and _may_roll_back(obs, spec, status):
        return _roll_back(obs, spec, status, text, actions, settings)
    if failures >= spec.restart.max_failures:
        status = replace(
            status,
            phase=_after(obs, Seen.GAVE_UP),
            failures=failures,
            driver_pod=None,
            observed_generation=obs.generation,
            message=f"{failures} failures in a row; last: {text}",
        )
        actions.append(Emit("Warning", "Failed", status.message))
        return Decision((*actions, *_write(obs, _with_ready(status, obs))))
    delay = max(restart_delay(spec, failures), min_delay)
    status = replace(
        status,
        phase=_after(obs, Seen.EXITED_FAILED),
        failures=failures,
        driver_pod=None,
        restarts=status.restarts + 1,
        next_start_at=(obs.now + timedelta(seconds=delay)).isoformat() if delay else None,
        message=text,
    )
    if not delay:
        actions.append(Emit("Warning", "DriverFailed", f"{text}; restarting now"))
        removed = [RemovePod(exited)] if exited else []
        return _start(obs, spec, status, status.phase, [*actions, *removed], settings)
    actions.append(Emit("Warning", "DriverFailed", f"{text}; restarting in {delay}s"))
    return Decision((*actions, *_write(obs, _with_ready(status, obs))), float(delay))


def restart_delay(spec: PipelineSpec, failures: int) -> int:
    """Seconds before restarting after ``failures`` failures in a row: none after the
    first (a crash after a healthy run costs no wait, as a kubelet restarts a container
    at once the first time), then ``backoffSeconds`` doubling up to its cap."""
    if failures <= 1:
        return 0
    doubled = spec.restart.backoff_seconds * (1 << (failures - 2))
    return min(doubled, spec.restart.max_backoff_seconds)


def _while_running(
    obs: Observed, spec: PipelineSpec, pod: PodView, actions: list[Action], settings: Settings
) -> Decision:
    status = obs.status
    if _node_lost(obs, spec, pod):
        message = f"node {pod.node} of {pod.name} lost for {spec.failover.node_lost_seconds}s"
        status = replace(status, restarts=status.restarts + 1)
        status = replace(
            status,
            conditions=_set_condition(status, "Fenced", "True", "NodeLost", message, obs),
        )
        decision = _start(
            obs,
            spec,
            status,
            _after(obs, Seen.NODE_LOST),
            [*actions, Emit("Warning", "NodeLost", message)],
            settings,
        )
        return replace(decision, actions=(*decision.actions, RemovePod(pod.name)))
    if pod.deleting:
        upgrade = status.stop_reason is StopReason.UPGRADE
        phase = _after(obs, Seen.UPGRADE_STOPPING if upgrade else Seen.DRIVER_STOPPING)
        return Decision(
            (*actions, *_write(obs, replace(status, phase=phase))), settings.requeue_seconds
        )
    overdue = _start_overdue(obs, spec, pod)
    if overdue is not None:
        return _count_failure(obs, spec, status, overdue, [*actions, RemovePod(pod.name)], settings)
    if _changed(status, spec):
        status = replace(
            status, phase=_after(obs, Seen.SPEC_CHANGED), stop_reason=StopReason.UPGRADE
        )
        actions += [
            StopPod(pod.name),
            Emit("Normal", "Upgrading", f"spec changed: stopping {pod.name} cleanly"),
        ]
        return Decision(
            (*actions, *_write(obs, _with_ready(status, obs))), settings.requeue_seconds
        )
    return _steady(obs, status, pod, actions, settings)


def _steady(
    obs: Observed, status: Status, pod: PodView, actions: list[Action], settings: Settings
) -> Decision:
    running = pod.phase.value == "Running"
    phase = _after(obs, Seen.DRIVER_RUNNING if running else Seen.DRIVER_PENDING)
    status = replace(status, phase=phase, observed_generation=obs.generation)
    status = _with_progress(status, pod, obs, settings)
    status = _with_good(status, pod, obs)
    status = _with_lag(status, pod, obs, settings)
    status, told = _with_start(status, pod, obs, running)
    actions += told
    status, told = _with_dependencies(status, pod, obs)
    actions += told
    status, told = _with_losses(status, pod, obs)
    actions += told
    status, told = _with_resets(status, pod, obs)
    actions += told
    stable = pod.running_since is not None and (
        (obs.now - pod.running_since).total_seconds() >= settings.stable_seconds
    )
    if stable and status.failures:
        status = replace(status, failures=0, message="")
    if running and status.phase is not obs.status.phase:
        actions.append(Emit("Normal", "Running", f"{pod.name} (epoch {pod.epoch}) is running"))
    status = _with_ready(status, obs)
    requeue = settings.progress_seconds if running else settings.requeue_seconds
    node_wait = _until_node_lost(obs, pod)
    if node_wait is not None:
        requeue = min(requeue, node_wait)
    return Decision((*actions, *_write(obs, status)), requeue)


def _invalid(obs: Observed) -> Decision:
    status = replace(
        obs.status,
        phase=_after(obs, Seen.INVALID_SPEC),
        message=f"invalid spec: {obs.spec_error}",
        observed_generation=obs.generation,
    )
    actions: list[Action] = [
        StopPod(p.name) for p in obs.pods if not p.terminated and not p.deleting
    ]
    return Decision((*actions, *_write(obs, _with_ready(status, obs))), finished=obs.deleting)


# -- building blocks --------------------------------------------------------------


def _start(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    phase: Phase,
    actions: list[Action],
    settings: Settings,
    epoch_floor: int = 0,
) -> Decision:
    """Write the next epoch ahead, then create its pod."""
    epoch = max(status.epoch, epoch_floor) + 1
    digest = changes.spec_hash(spec)
    if status.rolled_back is not None and not obs.rolling_back:  # a new spec replaced it
        status = replace(
            status,
            rolled_back=None,
            conditions=_set_condition(
                status, ROLLED_BACK, "False", "SpecChanged", "the spec changed since", obs
            ),
        )
    owner = builders.Owner(obs.name, obs.namespace, obs.uid)
    status = replace(
        status,
        phase=phase,
        epoch=epoch,
        driver_pod=naming.driver_pod(obs.name, epoch),
        image=spec.image,
        spec_hash=digest,
        stop_reason=None,
        next_start_at=None,
        observed_generation=obs.generation,
    )
    status = _with_ready(status, obs)
    return Decision(
        (
            *actions,
            WriteStatus(status),
            EnsureObjects(tuple(builders.supporting(owner))),
            CreatePod(builders.driver_pod(owner, spec, epoch, digest)),
            Emit("Normal", "DriverCreated", f"{status.driver_pod} (epoch {epoch}, {spec.image})"),
        ),
        settings.requeue_seconds,
    )


def _cleanup(others: list[PodView], obs: Observed) -> list[Action]:
    """Older drivers: remove the finished ones (keeping the newest for inspection),
    stop a running one, remove one whose node is lost."""
    actions: list[Action] = []
    finished = sorted((p for p in others if p.terminated), key=lambda p: p.epoch)
    actions += [RemovePod(p.name) for p in finished[:-1]]
    for pod in others:
        if pod.terminated or obs.spec is None:
            continue
        if _node_lost(obs, obs.spec, pod):
            actions.append(RemovePod(pod.name))
        elif not pod.deleting:
            actions.append(StopPod(pod.name))
    return actions


def _node_lost(obs: Observed, spec: PipelineSpec, pod: PodView) -> bool:
    if pod.node is None:
        return False
    node = obs.nodes.get(pod.node)
    if node is None:
        return True
    if node.ready or node.not_ready_since is None:
        return False
    lost_for = (obs.now - node.not_ready_since).total_seconds()
    return lost_for >= spec.failover.node_lost_seconds


ROLLED_BACK: Final = "RolledBack"


def _effective(obs: Observed, spec: PipelineSpec) -> Observed:
    """The spec to run: the user's, or, while it is the upgrade that failed and was
    rolled back, the last good spec's driver fields with the user's operator fields
    (so suspend, restart and failover settings still apply during a rollback)."""
    rolled, good = obs.status.rolled_back, obs.status.last_good
    if rolled is None or good is None or changes.spec_hash(spec) != rolled.spec_hash:
        return obs
    mine = spec.model_dump(mode="json", by_alias=True)
    operator_fields = {k: v for k, v in mine.items() if k in changes.OPERATOR_ONLY}
    try:
        previous = PipelineSpec.model_validate({**json.loads(good.spec), **operator_fields})
    except ValueError:
        return obs  # a good spec this version cannot read: run the user's
    return replace(obs, spec=previous, rolling_back=True)


def _may_roll_back(obs: Observed, spec: PipelineSpec, status: Status) -> bool:
    """The driver of the current spec gave up, and an older spec committed (and can
    still be read): roll back to it."""
    good = status.last_good
    mine = changes.spec_hash(spec)
    if not spec.upgrade.rollback or obs.rolling_back or good is None:
        return False
    if status.spec_hash != mine or good.spec_hash == mine:
        return False
    probe = replace(status, rolled_back=Rollback("", mine, "", ""))
    return _effective(replace(obs, status=probe), spec).rolling_back


def _roll_back(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    text: str,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    good = status.last_good
    assert good is not None
    failed = Rollback(status.image or "", changes.spec_hash(spec), text, obs.now.isoformat())
    message = f"upgrade to {failed.image} failed, rolled back to {good.image}: {text}"
    status = replace(
        status,
        failures=0,
        next_start_at=None,
        driver_pod=None,
        rolled_back=failed,
        message=message,
        restarts=status.restarts + 1,
        conditions=_set_condition(status, ROLLED_BACK, "True", "UpgradeFailed", message, obs),
    )
    actions.append(
        Emit(
            "Warning",
            ROLLED_BACK,
            f"{message}; {good.image} runs until the spec changes again",
        )
    )
    back = _effective(replace(obs, status=status), spec)
    assert back.spec is not None, "checked by _may_roll_back"
    return _start(back, back.spec, status, _after(obs, Seen.ROLLED_BACK), actions, settings)


def _with_good(status: Status, pod: PodView, obs: Observed) -> Status:
    """The current spec becomes the last good one once its driver commits a batch."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch or obs.spec is None:
        return status
    if report.batch_id is None or report.committed_at is None or status.spec_hash is None:
        return status
    if status.last_good is not None and status.last_good.spec_hash == status.spec_hash:
        return status
    if changes.spec_hash(obs.spec) != status.spec_hash:
        return status  # the driver runs an older spec: it is about to be replaced
    view = json.dumps(changes.driver_view(obs.spec), sort_keys=True)
    return replace(status, last_good=GoodSpec(status.spec_hash, status.image or "", view))


def after_rejection(obs: Observed, status: Status, why: str) -> Decision:
    """The API server refused to create the driver pod ``status`` names (admission,
    quota, an invalid field): a failure like an exit, retried after a back-off (never
    at once: the same pod would be refused again), Failed after ``maxFailures``. So a
    refused pod costs one epoch per attempt, not one per reconcile."""
    assert obs.spec is not None, "a pod is only created for a valid spec"
    text = f"{status.driver_pod} was refused by the API server: {why}"
    told: list[Action] = [Emit("Warning", "DriverRejected", text)]
    after = replace(obs, status=status)
    written = replace(status, driver_pod=None)
    floor = max(obs.spec.restart.backoff_seconds, 1)
    return _count_failure(after, obs.spec, written, text, told, DEFAULTS, min_delay=floor)


def _start_overdue(obs: Observed, spec: PipelineSpec, pod: PodView) -> str | None:
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


def _with_start(
    status: Status, pod: PodView, obs: Observed, running: bool
) -> tuple[Status, list[Emit]]:
    """A ``DriverStarted=False`` condition and a Warning Event naming the reason when
    the driver's pod waits for something that will not come by itself (an image that
    cannot be pulled, a missing Secret, no node that fits); True again once it runs."""
    previous = next((c for c in status.conditions if c.get("type") == STARTED), None)
    if running:
        if previous is None or previous.get("status") == "True":
            return status, []
        conditions = _set_condition(status, STARTED, "True", "Started", f"{pod.name} runs", obs)
        return replace(status, conditions=conditions), []
    if pod.waiting not in NOT_STARTING:
        return status, []
    message = f"{pod.name}: {pod.waiting}: {pod.waiting_message}".rstrip(": ")
    if previous is not None and previous.get("message") == message:
        return status, []
    conditions = _set_condition(status, STARTED, "False", pod.waiting, message, obs)
    deadline = obs.spec.restart.start_deadline_seconds if obs.spec else 0
    told = Emit("Warning", "DriverNotStarting", f"{message} (a failure {deadline}s after creation)")
    return replace(status, conditions=conditions), [told]


def _until_node_lost(obs: Observed, pod: PodView) -> float | None:
    """Seconds until the pod's NotReady node counts as lost (so the next look comes
    when failover is due, not a requeue interval later); None while it is Ready."""
    node = obs.nodes.get(pod.node) if pod.node else None
    if node is None or node.ready or node.not_ready_since is None or obs.spec is None:
        return None
    lost_for = (obs.now - node.not_ready_since).total_seconds()
    return max(obs.spec.failover.node_lost_seconds - lost_for, 0.0)


def _with_lag(status: Status, pod: PodView, obs: Observed, settings: Settings) -> Status:
    """The running driver's lag, when it differs from the stored one and that is at
    least ``progress_seconds`` old (one status write per interval while it moves, none
    while it stays); reports of another epoch's driver are ignored."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch or report.lag is None:
        return status
    known = status.lag
    if known is not None:
        if known.records == report.lag:
            return status
        if (obs.now - _aware(known.time)).total_seconds() < settings.progress_seconds:
            return status
    return replace(status, lag=Lag(report.lag, obs.now.isoformat()))


def _aware(stamp: str) -> datetime:
    moment = datetime.fromisoformat(stamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _changed(status: Status, spec: PipelineSpec) -> bool:
    return changes.classify(status.spec_hash, spec) is changes.Change.RESTART


def _with_progress(status: Status, pod: PodView, obs: Observed, settings: Settings) -> Status:
    """The running driver's last commit, if it is newer and the stored one is at
    least ``progress_seconds`` old; reports of another epoch's driver are ignored."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch or report.batch_id is None:
        return status
    if report.committed_at is None:
        return status
    known = status.last_commit
    if known is not None:
        if report.batch_id <= known.batch_id:
            return status
        stored = datetime.fromisoformat(known.time)
        if stored.tzinfo is None:
            stored = stored.replace(tzinfo=UTC)
        age = (report.committed_at - stored).total_seconds()
        if age < settings.progress_seconds:
            return status
    return replace(status, last_commit=LastCommit(report.batch_id, report.committed_at.isoformat()))


DEPENDENCIES: Final = "DependenciesAvailable"


def _with_dependencies(status: Status, pod: PodView, obs: Observed) -> tuple[Status, list[Emit]]:
    """The ``DependenciesAvailable`` condition from the running driver's own report: a
    driver waiting out an outage (Cassandra, Kafka, Datastore) is not failing, so the
    pipeline stays Running and says what it waits for; an Event marks each change."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch:
        return status, []
    previous = next((c for c in status.conditions if c.get("type") == DEPENDENCIES), None)
    if report.unavailable:
        names = ", ".join(report.unavailable)
        value, reason = "False", "Waiting"
        message = f"waiting for {names}: the driver keeps its batch and retries by itself"
        told = [Emit("Warning", "DependencyUnavailable", f"{pod.name}: {message}")]
    else:
        value, reason, message = "True", "Reachable", "every dependency answers"
        told = [Emit("Normal", "DependencyBack", f"{pod.name}: {message}")] if previous else []
    if previous is not None and previous.get("status") == value:
        told = []
    if previous is None and value == "True":
        return status, []
    conditions = _set_condition(status, DEPENDENCIES, value, reason, message, obs)
    return replace(status, conditions=conditions), told


LOSSES: Final = "RecordsLost"


def _with_losses(status: Status, pod: PodView, obs: Observed) -> tuple[Status, list[Emit]]:
    """A ``RecordsLost`` condition and Event when the running driver reports records
    that retention deleted before they were read (``onOffsetOutOfRange: earliest``),
    naming partitions and counts; a new Event whenever the count grows."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch or not report.lost:
        return status, []
    message = (
        "records deleted before they were read (retention, or a recreated topic): "
        + ", ".join(f"{where} {count}" for where, count in report.lost)
    )
    previous = next((c for c in status.conditions if c.get("type") == LOSSES), None)
    if previous is not None and previous.get("message") == message:
        return status, []
    conditions = _set_condition(status, LOSSES, "True", "RetentionDeleted", message, obs)
    return replace(status, conditions=conditions), [Emit("Warning", "RecordsLost", message)]


RESETS: Final = "OffsetOutOfRange"


def _with_resets(status: Status, pod: PodView, obs: Observed) -> tuple[Status, list[Emit]]:
    """An ``OffsetOutOfRange`` condition and Event when the running driver found its
    checkpoint beyond a partition's end (the topic was deleted and recreated, or the
    partition truncated) and read it again from its earliest offset
    (``onOffsetOutOfRange: earliest``), naming partition and offsets."""
    report = obs.progress
    resets = [r for r in report.resets if r.times] if report and report.epoch == pod.epoch else []
    if not resets:
        return status, []
    message = "committed offset beyond the end of the partition (topic recreated or " + (
        "truncated): "
        + ", ".join(
            f"{r.where} committed {r.committed}, read again from {r.resumed_at}" for r in resets
        )
    )
    previous = next((c for c in status.conditions if c.get("type") == RESETS), None)
    if previous is not None and previous.get("message") == message:
        return status, []
    conditions = _set_condition(status, RESETS, "True", "BeyondEndOffset", message, obs)
    return replace(status, conditions=conditions), [Emit("Warning", RESETS, message)]


def _note_exit(status: Status, pod: PodView) -> Status:
    """Record the last commit a driver reported when it exited (at its exit time)."""
    message = termination.parse(pod.message)
    batch = message.last_batch_id if message else None
    if batch is None or batch <= 0 or pod.finished_at is None:
        return status
    if status.last_commit is not None and batch < status.last_commit.batch_id:
        return status
    return replace(status, last_commit=LastCommit(batch, pod.finished_at.isoformat()))


def _after(obs: Observed, seen: Seen) -> Phase:
    return next_phase(obs.status.phase, seen)


def _write(obs: Observed, status: Status) -> tuple[Action, ...]:
    return (WriteStatus(status),) if status != obs.status else ()


def _with_ready(status: Status, obs: Observed) -> Status:
    ready = "True" if status.phase is Phase.RUNNING else "False"
    return replace(
        status,
        conditions=_set_condition(status, "Ready", ready, status.phase.value, status.message, obs),
    )


def _set_condition(
    status: Status, kind: str, value: str, reason: str, message: str, obs: Observed
) -> tuple[dict[str, Any], ...]:
    """``status``'s conditions with ``kind`` set; the time it last changed value is
    kept while the value stays, and ``observedGeneration`` says which spec it is about."""
    kept = [dict(c) for c in status.conditions if c.get("type") != kind]
    previous = next((c for c in status.conditions if c.get("type") == kind), None)
    since = (
        previous.get("lastTransitionTime")
        if previous is not None and previous.get("status") == value
        else obs.now.isoformat()
    )
    condition = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": obs.generation,
    }
    return (*kept, condition)
