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
* the spec changed in a field the driver reads: clean stop, then a new driver; with
  ``upgrade.mode: WarmHandover`` the new driver starts first as a standby, and only
  once it is ready is the old one stopped (``_with_standby``, see below);
* the pod of the driver is not running ``restart.startDeadlineSeconds`` after its
  creation, or the API server refused it: a failure, as an exit is;
* the driver of a changed spec gave up (or exited 2): run the last good spec again
  (``rollback``).

A warm handover: the standby's epoch is written (``status.standby``) before its pod
exists; while it starts the running driver goes on; once it reports ready the old
driver is stopped cleanly and, when it has exited (or its node is lost), the standby
becomes the current driver (``_promote``). A standby that exits or is not ready within
``restart.startDeadlineSeconds`` is removed and the upgrade reported failed
(``UpgradeFailed``); the same spec is not tried again, a changed one is. Epochs are
never reused: the next is above the current driver's and any standby's.

Every new epoch is written to the status before its pod is created, so an operator
restarted at any instant resumes from the status alone. The phase comes from
``lifecycle``; what the running driver reports (``reports``), a pod that does not
start (``starting``) and the conditions (``conditions``) have their own modules.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sluice_api import termination
from sluice_api.exitcodes import ExitCode
from sluice_api.replacement import UpgradeMode
from sluice_api.spec import PipelineSpec
from sluice_operator import (
    builders,
    changes,
    envfrom,
    hot_standby,
    naming,
    podpolicy,
    reports,
    rollback,
    starting,
    understood,
)
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
from sluice_operator.conditions import says, set_condition, with_ready
from sluice_operator.consent import CONDITION as SECRETS_USABLE
from sluice_operator.consent import DEFAULT as DEFAULT_SECRET_LABEL
from sluice_operator.consent import Label
from sluice_operator.lifecycle import Seen, next_phase
from sluice_operator.model import (
    Observed,
    Phase,
    PodView,
    Rollback,
    Standby,
    StandbyPurpose,
    StandbyState,
    Status,
    StopReason,
)
from sluice_operator.progress import DriverProgress

UPGRADE_FAILED = "UpgradeFailed"
"""Condition: the standby of a warm handover never became ready (True), or the spec
changed since and is being tried (False)."""
PROMOTE_RETRY_SECONDS = 1.0
"""How soon a promotion that did not reach its standby is sent again."""
SERVICE_ACCOUNT_ALLOWED = "ServiceAccountAllowed"
"""Condition: the ServiceAccount a spec names is one the platform allows."""
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
    secret_label: Label | None = DEFAULT_SECRET_LABEL
    """The label a Secret needs before a pipeline may use it (``consent``); ``None``:
    any Secret of the namespace."""
    require_endpoints: bool = False
    """A Secret whose value a pipeline's connection sends must carry the annotation
    ``sluice.dev/allowed-endpoints`` (``consent``); ``False``: without it, anywhere."""
    refused_secret_types: frozenset[str] = frozenset()
    """Secret types no pipeline may use, labelled or not, beyond service-account
    tokens, which are always refused (``consent.token_refusals``)."""
    consent_seconds: float = 10.0
    """How often a pipeline waiting for a Secret's label looks again."""
    consent_recheck_seconds: float = 30.0
    """How often the Secrets a running driver uses are checked again: a label removed
    (or an allowed endpoint withdrawn) stops the driver."""
    driver_cluster_role: str = builders.DRIVER_CLUSTER_ROLE
    """The ClusterRole a driver with executors is bound to in its namespace."""
    driver_service_accounts: frozenset[str] = frozenset()
    """ServiceAccounts a pipeline may name in ``spark.pod.serviceAccountName``."""
    pod_policy: podpolicy.PodPolicy = podpolicy.NOTHING
    """The priority classes, tolerations, node labels and label and annotation keys
    a pipeline's pods may carry (``podpolicy``); default: none."""
    spark_ui_on_network: bool = False
    """Drivers' Spark UI may listen on the pod's address (else on loopback only)."""
    cluster_id: str = ""
    """The cluster the operator runs in (``sluice_api.cluster``), passed to drivers for
    their checkpoint key; ``python -m sluice_operator`` always resolves one
    (``cluster.resolve``)."""


DEFAULTS = Settings()


def decide(obs: Observed, settings: Settings = DEFAULTS) -> Decision:
    if obs.spec is None:
        return _invalid(obs)
    obs = rollback.effective(obs, obs.spec)
    spec = obs.spec
    assert spec is not None
    current = next((p for p in obs.pods if p.name == obs.status.driver_pod), None)
    settled, kept, told = _settle_standby(obs, spec, current)
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
        refused = _refusal(obs, spec, settings)
        if refused is not None:
            return _consent_withdrawn(obs, current, refused, actions, settings)
    handing_over = kept is not None and hot_standby.promotable(kept, standby_pod)
    if handing_over and (current is None or current.terminated or _node_lost(obs, spec, current)):
        assert kept is not None
        return _promote(obs, spec, current, kept, actions, settings)
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
    status = with_ready(status, obs)
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
        if rollback.may_roll_back(obs, spec, status):  # an upgrade the driver refuses: at once
            return _roll_back(obs, spec, status, f"{pod.name} exited 2: {text}", actions, settings)
        failed = replace(
            status, phase=_after(obs, Seen.EXITED_INVALID), driver_pod=None, message=text
        )
        failed = replace(failed, observed_generation=obs.generation)
        return Decision(
            (
                *actions,
                Emit("Warning", "InvalidConfig", text),
                *_write(obs, with_ready(failed, obs)),
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
    if failures >= spec.restart.max_failures and rollback.may_roll_back(obs, spec, status):
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
        return Decision((*actions, *_write(obs, with_ready(status, obs))))
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
    return Decision((*actions, *_write(obs, with_ready(status, obs))), float(delay))


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
            conditions=set_condition(status, "Fenced", "True", "NodeLost", message, obs),
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
    overdue = starting.overdue(obs, spec, pod)
    if overdue is not None:
        return _count_failure(obs, spec, status, overdue, [*actions, RemovePod(pod.name)], settings)
    standby = status.standby
    if standby is not None and standby.live and not standby.hot:
        return _with_standby(obs, spec, pod, standby, actions, settings)
    if standby is not None and standby.live:
        status, told = _with_hot_standby(obs, spec, standby, settings)
        actions += told
    warm = spec.upgrade.mode is UpgradeMode.WARM_HANDOVER and pod.phase.value == "Running"
    if _changed(status, spec) and warm:
        return _start_standby(obs, spec, pod, actions, settings)
    if not _changed(status, spec) and _upgrade_failed(status):  # the spec went back
        reverted = "the spec is the running driver's again"
        conditions = set_condition(status, UPGRADE_FAILED, "False", "SpecReverted", reverted, obs)
        status = replace(status, conditions=conditions, message="")
    if _changed(status, spec):
        status = replace(
            status, phase=_after(obs, Seen.SPEC_CHANGED), stop_reason=StopReason.UPGRADE
        )
        actions += [
            StopPod(pod.name),
            Emit("Normal", "Upgrading", f"spec changed: stopping {pod.name} cleanly"),
        ]
        return Decision((*actions, *_write(obs, with_ready(status, obs))), settings.requeue_seconds)
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
    if report is not None and report.standby_ready and report.epoch == status.epoch and pod.ip:
        # Promoted (``_promote``), but the promotion did not reach it yet: again.
        actions.append(Promote(pod.name, pod.ip, status.epoch))
        return _steady(obs, status, pod, actions, settings, PROMOTE_RETRY_SECONDS)
    if hot_standby.wanted(obs, spec, status, pod):
        wait = hot_standby.retry_in(spec, status.standby, obs.now)
        if wait <= 0:
            return _start_standby(
                replace(obs, status=status), spec, pod, actions, settings, StandbyPurpose.FAILOVER
            )
        return _steady(obs, status, pod, actions, settings, wait)
    return _steady(obs, status, pod, actions, settings)


def _with_hot_standby(
    obs: Observed, spec: PipelineSpec, standby: Standby, settings: Settings
) -> tuple[Status, list[Action]]:
    """A starting hot standby: created if written ahead only, failed when late, Ready
    once it says so; the driver is not touched."""
    status = obs.status
    if standby.state is not StandbyState.STARTING:
        return status, []
    spare = next((p for p in obs.pods if p.name == standby.pod), None)
    if spare is None:  # written ahead, never created (an operator restarted in between)
        owner = _owner(obs, settings)
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


# -- warm handover -----------------------------------------------------------------


def _settle_standby(
    obs: Observed, spec: PipelineSpec, current: PodView | None
) -> tuple[Observed, Standby | None, list[Action]]:
    """The standby ``status.standby`` names, if it is still wanted: ``obs`` with its
    record moved on when it is not (cancelled, or failed during the handover; its pod
    is then one of the others ``_cleanup`` stops), and what to tell."""
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
        return obs, standby, []  # written ahead, not created yet: _with_hot_standby does
    gone = ""
    if pod is None or pod.terminated:
        gone = "it ended"
    elif pod.deleting:
        gone = "its pod was deleted"
    elif _node_lost(obs, spec, pod):
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


def _start_standby(
    obs: Observed,
    spec: PipelineSpec,
    pod: PodView,
    actions: list[Action],
    settings: Settings,
    purpose: StandbyPurpose = StandbyPurpose.UPGRADE,
) -> Decision:
    """Write the standby's epoch ahead, then create its pod; the running driver goes
    on. A spec whose upgrade standby failed is not tried again (the failure stays
    reported); a hot standby is (``hot_standby.retry_in``)."""
    status, digest = obs.status, changes.spec_hash(spec)
    previous = status.standby
    failed = previous is not None and previous.state is StandbyState.FAILED
    hot = purpose is StandbyPurpose.FAILOVER
    if not hot and failed and previous is not None and previous.spec_hash == digest:
        return _steady(obs, status, pod, actions, settings)
    refused = _refusal(obs, spec, settings)
    if refused is not None:
        return _wait_for_consent(obs, status, actions, settings, refused)
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
    allowed = {*(status.executor_secrets or ()), *(_executor_secrets(obs, spec) or ())}
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
    owner = _owner(obs, settings)
    said = (
        f"hot standby {standby.pod} (epoch {epoch}) starts beside {pod.name}"
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


def _with_standby(
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
            status, phase=_after(obs, Seen.UPGRADE_STOPPING), stop_reason=StopReason.UPGRADE
        )
        actions.append(StopPod(pod.name))
        return Decision((*actions, *_write(obs, with_ready(status, obs))), settings.requeue_seconds)
    if spare is None:  # written ahead, never created (an operator restarted in between)
        owner = _owner(obs, settings)
        manifest = builders.driver_pod(
            owner, spec, standby.epoch, standby.spec_hash, standby=StandbyPurpose.UPGRADE
        )
        actions.append(CreatePod(manifest))
        return _steady(obs, status, pod, actions, settings, settings.requeue_seconds)
    late = _standby_late(obs, spec, spare)
    if spare.terminated or late:
        why = late or "it exited before it was ready"
        failed, _, told = _failed_standby(obs, standby, spare, why)
        return _steady(obs, failed.status, pod, [*actions, *told], settings)
    report = obs.standby_progress
    if report is None or report.epoch != standby.epoch or not report.standby_ready:
        return _steady(obs, status, pod, actions, settings, settings.requeue_seconds)
    status = replace(
        status,
        standby=replace(standby, state=StandbyState.READY),
        phase=_after(obs, Seen.SPEC_CHANGED),
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
    return Decision((*actions, *_write(obs, with_ready(status, obs))), settings.requeue_seconds)


def _upgrade_failed(status: Status) -> bool:
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


def _promote(
    obs: Observed,
    spec: PipelineSpec,
    current: PodView | None,
    standby: Standby,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    """The old driver has exited (or its node is lost, or, for a hot standby, its pod
    is gone): the standby is current. An upgrade's claims once the pipeline is released
    (or fences it after the stop timeout); both are told to claim now (``Promote``),
    after the status names them: a hot standby waits for nothing else."""
    status = obs.status
    before = "its predecessor"
    lost = current is not None and not current.terminated and _node_lost(obs, spec, current)
    if current is not None:
        before = current.name
        if current.terminated:
            status = _note_exit(status, current)
            before += f", which exited {current.exit_code}"
        elif lost:
            before += f", whose node {current.node} is lost"
        actions.append(RemovePod(current.name))
    seen = Seen.DRIVER_RUNNING if standby.hot else Seen.STOPPED_FOR_UPGRADE
    status = replace(
        status,
        phase=_after(obs, seen),
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
    status = _new_spec_runs(obs, status)
    if obs.spec is not None and changes.spec_hash(obs.spec) == standby.spec_hash:
        status = replace(status, executor_secrets=_executor_secrets(obs, obs.spec))
    said = f"{standby.pod} (epoch {standby.epoch}, {standby.image}) takes over from {before}"
    actions.append(Emit("Normal", "Promoted" if standby.hot else "HandedOver", said))
    spare = next((p for p in obs.pods if p.name == standby.pod), None)
    told: list[Action] = []
    if spare is not None and spare.ip:
        told.append(Promote(spare.name, spare.ip, standby.epoch))
    requeue = PROMOTE_RETRY_SECONDS if standby.hot else settings.requeue_seconds
    return Decision((*actions, WriteStatus(with_ready(status, obs)), *told), requeue)


def _steady(
    obs: Observed,
    status: Status,
    pod: PodView,
    actions: list[Action],
    settings: Settings,
    requeue_at_most: float | None = None,
) -> Decision:
    running = pod.phase.value == "Running"
    phase = _after(obs, Seen.DRIVER_RUNNING if running else Seen.DRIVER_PENDING)
    status = replace(status, phase=phase, observed_generation=obs.generation)
    if status.executor_secrets is None and obs.spec is not None:
        # A driver started by an operator that did not write them yet: its executors
        # would be refused until the next driver.
        status = replace(status, executor_secrets=_executor_secrets(obs, obs.spec))
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
    stable = pod.running_since is not None and (
        (obs.now - pod.running_since).total_seconds() >= settings.stable_seconds
    )
    if stable and status.failures:
        status = replace(status, failures=0, message="")
    if running and status.phase is not obs.status.phase:
        actions.append(Emit("Normal", "Running", f"{pod.name} (epoch {pod.epoch}) is running"))
    status = with_ready(status, obs)
    requeue = settings.progress_seconds if running else settings.requeue_seconds
    node_wait = _until_node_lost(obs, pod)
    if node_wait is not None:
        requeue = min(requeue, node_wait)
    if requeue_at_most is not None:
        requeue = min(requeue, requeue_at_most)
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
    return Decision((*actions, *_write(obs, with_ready(status, obs))), finished=obs.deleting)


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
    """Write the next epoch ahead, then create its pod; unless the spec names a Secret
    the platform has not allowed, then wait for its label without using an epoch."""
    refused = _refusal(obs, spec, settings)
    if refused is not None:
        return _wait_for_consent(obs, status, actions, settings, refused)
    for kind, reason, message in (
        (SECRETS_USABLE, "Labelled", "every Secret may be used"),
        (SERVICE_ACCOUNT_ALLOWED, "Listed", "the ServiceAccount may be used"),
        (envfrom.CONDITION, "NoReservedName", "no envFrom key makes a reserved variable"),
        (podpolicy.CONDITION, "Allowed", "the platform allows the pods' settings"),
    ):
        if any(c.get("type") == kind for c in status.conditions):
            status = replace(
                status, conditions=set_condition(status, kind, "True", reason, message, obs)
            )
    epoch = max(status.highest_epoch, epoch_floor) + 1
    digest = changes.spec_hash(spec)
    status = _new_spec_runs(obs, status)
    if status.standby is not None and status.standby.live:  # a new driver instead of it
        actions = [*actions, StopPod(status.standby.pod)]
        status = replace(
            status,
            standby=replace(
                status.standby, state=StandbyState.CANCELLED, message="a new driver started"
            ),
        )
    owner = _owner(obs, settings)
    status = replace(
        status,
        executor_secrets=_executor_secrets(obs, spec),
        phase=phase,
        epoch=epoch,
        driver_pod=naming.driver_pod(obs.name, epoch),
        image=spec.image,
        spec_hash=digest,
        stop_reason=None,
        next_start_at=None,
        observed_generation=obs.generation,
    )
    status = with_ready(status, obs)
    return Decision(
        (
            *actions,
            WriteStatus(status),
            EnsureObjects(tuple(builders.supporting(owner, spec, settings.driver_cluster_role))),
            CreatePod(builders.driver_pod(owner, spec, epoch, digest)),
            Emit("Normal", "DriverCreated", f"{status.driver_pod} (epoch {epoch}, {spec.image})"),
        ),
        settings.requeue_seconds,
    )


def _new_spec_runs(obs: Observed, status: Status) -> Status:
    """A rolled-back upgrade is over once a new spec's driver starts."""
    if status.rolled_back is None or obs.rolling_back:
        return status
    return replace(
        status,
        rolled_back=None,
        conditions=set_condition(
            status, rollback.ROLLED_BACK, "False", "SpecChanged", "the spec changed since", obs
        ),
    )


@dataclass(frozen=True)
class Refusal:
    """What keeps a driver pod from being created until the platform allows it."""

    condition: str
    reason: str
    event: str
    message: str


def _refusal(obs: Observed, spec: PipelineSpec, settings: Settings) -> Refusal | None:
    if obs.secret_refusals or obs.endpoint_refusals:
        message = "; ".join((*obs.secret_refusals, *obs.endpoint_refusals))
        reason = "NotLabelled" if obs.secret_refusals else "EndpointNotAllowed"
        return Refusal(SECRETS_USABLE, reason, "SecretNotUsable", message)
    if obs.env_refusals:
        message = "; ".join(obs.env_refusals)
        return Refusal(envfrom.CONDITION, envfrom.REASON, envfrom.EVENT, message)
    account = spec.spark.pod.service_account_name
    if account and account not in settings.driver_service_accounts:
        listed = ", ".join(sorted(settings.driver_service_accounts)) or "none"
        return Refusal(
            SERVICE_ACCOUNT_ALLOWED,
            "NotListed",
            "ServiceAccountNotAllowed",
            f"ServiceAccount {account!r} (spark.pod.serviceAccountName) is not one the "
            f"platform lets drivers run as (the operator's --driver-service-accounts: {listed})",
        )
    placed = podpolicy.refusals(spec, settings.pod_policy)
    if placed:
        message = "; ".join(placed)
        return Refusal(podpolicy.CONDITION, podpolicy.REASON, podpolicy.EVENT, message)
    return None


def _wait_for_consent(
    obs: Observed, status: Status, actions: list[Action], settings: Settings, refused: Refusal
) -> Decision:
    message = refused.message
    before = next((c for c in status.conditions if c.get("type") == refused.condition), None)
    if before is None or before.get("status") != "False" or not says(before, message):
        actions.append(Emit("Warning", refused.event, message))
    status = replace(
        status,
        message=f"no driver started: {message}",
        observed_generation=obs.generation,
        conditions=set_condition(status, refused.condition, "False", refused.reason, message, obs),
    )
    return Decision((*actions, *_write(obs, with_ready(status, obs))), settings.consent_seconds)


def _consent_withdrawn(
    obs: Observed, pod: PodView, refused: Refusal, actions: list[Action], settings: Settings
) -> Decision:
    """A Secret the running driver uses may no longer be used (its label removed, its
    allowed endpoints narrowed, its type refused): the driver stops cleanly, its batch
    in flight committed, and the pipeline then waits for consent as one that never
    started does (``_wait_for_consent``)."""
    message = refused.message
    status = obs.status
    before = next((c for c in status.conditions if c.get("type") == refused.condition), None)
    if before is None or before.get("status") != "False" or not says(before, message):
        actions.append(Emit("Warning", refused.event, f"stopping {pod.name}: {message}"))
    if not pod.deleting:
        actions.append(StopPod(pod.name))
    status = replace(
        status,
        phase=_after(obs, Seen.STOP_ASKED),
        message=f"driver stopping: {message}",
        conditions=set_condition(status, refused.condition, "False", refused.reason, message, obs),
    )
    return Decision((*actions, *_write(obs, with_ready(status, obs))), settings.requeue_seconds)


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
        if _node_lost(obs, obs.spec, pod) or pod.epoch > obs.status.epoch:
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
        conditions=set_condition(
            status, rollback.ROLLED_BACK, "True", "UpgradeFailed", message, obs
        ),
    )
    actions.append(
        Emit(
            "Warning",
            rollback.ROLLED_BACK,
            f"{message}; {good.image} runs until the spec changes again",
        )
    )
    back = rollback.effective(replace(obs, status=status), spec)
    assert back.spec is not None, "checked by _may_roll_back"
    return _start(back, back.spec, status, _after(obs, Seen.ROLLED_BACK), actions, settings)


def after_rejection(
    obs: Observed, status: Status, why: str, *, reason: str = "DriverRejected"
) -> Decision:
    """The API server refused to create the driver pod ``status`` names (admission,
    quota, an invalid field), or an object it needs is someone else's (``reason``
    ``NotOwned``): a failure like an exit, retried after a back-off (never at once:
    the same pod would be refused again), Failed after ``maxFailures``. So a refused
    pod costs one epoch per attempt, not one per reconcile."""
    assert obs.spec is not None, "a pod is only created for a valid spec"
    cause = "was refused by the API server" if reason == "DriverRejected" else "was not created"
    text = f"{status.driver_pod} {cause}: {why}"
    told: list[Action] = [Emit("Warning", reason, text)]
    after = replace(obs, status=status)
    written = replace(status, driver_pod=None)
    floor = max(obs.spec.restart.backoff_seconds, 1)
    return _count_failure(after, obs.spec, written, text, told, DEFAULTS, min_delay=floor)


def _executor_secrets(obs: Observed, spec: PipelineSpec) -> tuple[str, ...] | None:
    """``status.executorSecrets`` for a driver of ``spec``: ``None`` without executors."""
    if spec.spark.executors.instances == 0:
        return None
    owner = builders.Owner(obs.name, obs.namespace, obs.uid, "")
    return builders.executor_secrets(owner, spec)


def _until_node_lost(obs: Observed, pod: PodView) -> float | None:
    """Seconds until the pod's NotReady node counts as lost (so the next look comes
    when failover is due, not a requeue interval later); None while it is Ready."""
    node = obs.nodes.get(pod.node) if pod.node else None
    if node is None or node.ready or node.not_ready_since is None or obs.spec is None:
        return None
    lost_for = (obs.now - node.not_ready_since).total_seconds()
    return max(obs.spec.failover.node_lost_seconds - lost_for, 0.0)


def _owner(obs: Observed, settings: Settings) -> builders.Owner:
    """The pipeline as the objects the operator makes for it name it, with what the
    platform decided for its drivers."""
    return builders.Owner(
        obs.name,
        obs.namespace,
        obs.uid,
        settings.cluster_id,
        ui_on_network=settings.spark_ui_on_network,
    )


def _changed(status: Status, spec: PipelineSpec) -> bool:
    return changes.classify(status.spec_hash, spec) is changes.Change.RESTART


def _note_exit(status: Status, pod: PodView) -> Status:
    """Record the last commit a driver reported when it exited (at its exit time), as
    its last report (``reports.follow``): a fenced driver's never replaces a newer
    epoch's."""
    message = termination.parse(pod.message)
    batch = message.last_batch_id if message else None
    if batch is None or batch <= 0 or pod.finished_at is None:
        return status
    said = DriverProgress(pod.epoch, batch, pod.finished_at, lag=None)
    return replace(status, last_commit=reports.follow(status.last_commit, said, 0.0))


def _after(obs: Observed, seen: Seen) -> Phase:
    return next_phase(obs.status.phase, seen)


def _write(obs: Observed, status: Status) -> tuple[Action, ...]:
    return (WriteStatus(status),) if status != obs.status else ()
