"""The operator's lifecycle rules, on hand-made observations."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sluice_api.exitcodes import ExitCode
from sluice_api.termination import Termination
from sluice_operator import changes, hot_standby, naming
from sluice_operator.actions import CreatePod, Decision, Emit, RemovePod, StopPod, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.failures import after_rejection, restart_delay
from sluice_operator.model import (
    LastCommit,
    NodeView,
    Phase,
    PodPhase,
    PodView,
    StandbyPurpose,
    Status,
    StopReason,
)
from sluice_operator.progress import DriverProgress, OffsetReset
from sluice_operator.settings import DEFAULTS
from tests.support.observations import NOW, observed, spec

pytestmark = pytest.mark.unit


def running(epoch: int = 4, node: str = "n1") -> tuple[Status, PodView]:
    pod = PodView(
        naming.driver_pod("kpis", epoch),
        epoch,
        PodPhase.RUNNING,
        node,
        running_since=NOW - timedelta(seconds=5),
    )
    status = Status(
        phase=Phase.RUNNING,
        epoch=epoch,
        driver_pod=pod.name,
        image="sluice-job:v1",
        spec_hash=changes.spec_hash(spec()),
    )
    return status, pod


def exited(code: int, message: dict[str, Any] | None = None) -> tuple[Status, PodView]:
    status, pod = running()
    return status, replace(
        pod,
        phase=PodPhase.FAILED if code else PodPhase.SUCCEEDED,
        exit_code=code,
        message=_termination(code, message or {}),
    )


def _termination(code: int, fields: dict[str, Any]) -> str:
    """What a driver exiting with ``code`` writes (sluice_api.termination)."""
    return Termination(
        ExitCode(code),
        "Test",
        str(fields.get("message", "")),
        held_by_epoch=fields.get("heldByEpoch"),
    ).to_json()


def kinds(decision: Decision) -> list[str]:
    return [type(a).__name__ for a in decision.actions]


def written(decision: Decision) -> Status:
    return [a.status for a in decision.actions if isinstance(a, WriteStatus)][-1]


def test_new_pipeline_writes_epoch_1_before_creating_its_pod() -> None:
    decision = decide(observed(Status()))
    order = kinds(decision)
    assert order.index("WriteStatus") < order.index("CreatePod")
    status = written(decision)
    assert (status.epoch, status.driver_pod, status.phase) == (1, "kpis-driver-1", Phase.STARTING)
    pod = next(a.manifest for a in decision.actions if isinstance(a, CreatePod))
    assert pod["metadata"]["name"] == "kpis-driver-1"
    assert pod["metadata"]["labels"][naming.LABEL_EPOCH] == "1"


def test_running_driver_with_unchanged_spec_needs_nothing_but_status() -> None:
    status, pod = running()
    decision = decide(observed(status, (pod,)))
    assert not [a for a in decision.actions if isinstance(a, (CreatePod, StopPod, RemovePod))]


def test_failed_driver_restarts_after_exponential_backoff_with_a_new_epoch() -> None:
    status, pod = exited(1, {"message": "sink down"})
    first = decide(observed(replace(status, failures=1), (pod,)))
    after = written(first)
    assert after.phase is Phase.RECOVERING
    assert after.driver_pod is None
    assert after.next_start_at == (NOW + timedelta(seconds=10)).isoformat()  # the 2nd: 10 s
    later = decide(observed(after, (pod,), now=NOW + timedelta(seconds=11)))
    assert written(later).epoch == 5
    assert "CreatePod" in kinds(later)


def test_the_first_failure_after_a_healthy_run_restarts_at_once() -> None:
    """Recovery from a killed driver waited ``backoffSeconds`` (10 s) even after a
    long healthy run; like a kubelet's first restart, the first costs no wait."""
    status, pod = exited(1, {"message": "killed"})
    decision = decide(observed(replace(status, failures=0), (pod,)))
    after = written(decision)
    assert (after.phase, after.failures, after.epoch) == (Phase.RECOVERING, 1, 5)
    assert "CreatePod" in kinds(decision)
    assert RemovePod(pod.name) in decision.actions


@pytest.mark.parametrize(
    ("failures", "seconds"), [(1, 0), (2, 10), (3, 20), (4, 40), (5, 60), (9, 60)]
)
def test_restart_delays_double_from_the_second_failure_up_to_the_cap(
    failures: int, seconds: int
) -> None:
    assert restart_delay(spec(), failures) == seconds


def test_too_many_failures_in_a_row_fail_the_pipeline() -> None:
    status, pod = exited(1)
    decision = decide(observed(replace(status, failures=2), (pod,)))
    assert written(decision).phase is Phase.FAILED
    assert "CreatePod" not in kinds(decision)


def test_invalid_configuration_fails_at_once_with_the_drivers_message() -> None:
    status, pod = exited(2, {"message": "spec.source.kafka.topics: too short"})
    decision = decide(observed(status, (pod,)))
    assert written(decision).phase is Phase.FAILED
    assert "spec.source.kafka.topics" in written(decision).message
    assert decide(observed(written(decision), (pod,))).actions == ()


def test_fenced_driver_is_replaced_by_an_epoch_above_the_holder() -> None:
    status, pod = exited(3, {"heldByEpoch": 9})
    assert written(decide(observed(status, (pod,)))).epoch == 10


def test_lost_node_starts_a_new_driver_before_removing_the_old_pod() -> None:
    status, pod = running(node="n1")
    lost = {"n1": NodeView("n1", False, NOW - timedelta(seconds=31)), "n2": NodeView("n2", True)}
    decision = decide(observed(status, (pod,), nodes=lost))
    order = kinds(decision)
    assert order.index("CreatePod") < order.index("RemovePod")
    assert RemovePod(pod.name) in decision.actions
    assert written(decision).epoch == 5
    assert any(c["type"] == "Fenced" for c in written(decision).conditions)


def test_node_not_ready_for_less_than_node_lost_seconds_is_waited_out() -> None:
    """The driver stays the pipeline's (no new epoch takes over, nothing stops it);
    the only pod made is its replacement, a hot standby to promote if the node is
    lost (``hot_standby.replacement_wanted``)."""
    status, pod = running(node="n1")
    flaky = {"n1": NodeView("n1", False, NOW - timedelta(seconds=10))}
    decision = decide(observed(status, (pod,), nodes=flaky))
    after = written(decision)
    assert (after.epoch, after.driver_pod) == (status.epoch, status.driver_pod)
    assert not [a for a in decision.actions if isinstance(a, (StopPod, RemovePod))]
    assert after.standby is not None
    assert after.standby.purpose is StandbyPurpose.FAILOVER


def test_a_driver_silent_on_a_ready_node_gets_its_replacement_started_ahead() -> None:
    """A crashed node's driver cannot be reached at once, while its node is Ready for
    the node grace (10 s in the soak's stack, 40 s by default). Its replacement now
    starts when the driver has been silent for ``hot_standby.REPLACE_SILENT_SECONDS``
    instead of at the NotReady, so it is warm when the node counts as lost: in the
    soak without a standby a node crash took 22.5-24.8 s to the next commit, the
    replacement started at the NotReady with 5 s to start a JVM and promoted in the
    middle of its warm-up."""
    status, pod = running(node="n1")
    silence = hot_standby.REPLACE_SILENT_SECONDS + 0.5
    decision = decide(observed(status, (pod,), driver_silent_seconds=silence))
    after = written(decision)
    assert (after.epoch, after.driver_pod) == (status.epoch, status.driver_pod)
    assert not [a for a in decision.actions if isinstance(a, (StopPod, RemovePod))]
    (replacement,) = [a for a in decision.actions if isinstance(a, CreatePod)]
    assert replacement.manifest["metadata"]["name"] == "kpis-driver-5"
    assert after.standby is not None
    assert after.standby.purpose is StandbyPurpose.FAILOVER
    [said] = [a.message for a in decision.actions if isinstance(a, Emit)]
    assert f"not reached for {silence:.1f}s" in said


def test_a_driver_silent_briefly_is_looked_at_again_when_it_would_be_replaced() -> None:
    status, pod = running(node="n1")
    silence = hot_standby.REPLACE_SILENT_SECONDS - 0.5
    decision = decide(observed(status, (pod,), driver_silent_seconds=silence))
    assert "CreatePod" not in kinds(decision)
    assert decision.requeue_after == pytest.approx(0.5)


def test_the_replacement_of_a_silent_driver_is_removed_once_it_answers_again() -> None:
    status, pod = running(node="n1")
    silence = hot_standby.REPLACE_SILENT_SECONDS + 1
    started = written(decide(observed(status, (pod,), driver_silent_seconds=silence)))
    assert started.standby is not None
    spare = PodView(
        started.standby.pod, started.standby.epoch, PodPhase.RUNNING, "n2", ip="10.0.0.5"
    )
    back = decide(observed(started, (pod, spare), driver_silent_seconds=None))
    assert RemovePod(spare.name) in back.actions
    assert written(back).epoch == status.epoch


def test_spec_change_stops_cleanly_then_starts_the_new_spec() -> None:
    status, pod = running()
    new = spec(image="sluice-job:v2")
    stop = decide(observed(status, (pod,), spec=new, generation=2))
    assert StopPod(pod.name) in stop.actions
    stopping = written(stop)
    assert (stopping.phase, stopping.stop_reason) == (Phase.UPGRADING, StopReason.UPGRADE)
    done = replace(pod, phase=PodPhase.SUCCEEDED, exit_code=0, message="{}")
    start = decide(observed(stopping, (done,), spec=new, generation=2))
    status_after = written(start)
    assert (status_after.phase, status_after.epoch, status_after.image) == (
        Phase.UPGRADING,
        5,
        "sluice-job:v2",
    )


def test_a_new_restart_nonce_restarts_the_driver_with_a_clean_stop() -> None:
    """Issue 15 item 4: a restart on request, instead of patching transform.options."""
    status, pod = running()
    stop = decide(observed(status, (pod,), spec=spec(restartNonce="2026-11-24")))
    assert StopPod(pod.name) in stop.actions
    done = replace(pod, phase=PodPhase.SUCCEEDED, exit_code=0)
    again = written(decide(observed(written(stop), (done,), spec=spec(restartNonce="2026-11-24"))))
    assert (again.epoch, again.restarts) == (5, 0)


def test_operator_only_fields_do_not_restart_the_driver() -> None:
    status, pod = running()
    new = spec(restart={"backoffSeconds": 1, "maxBackoffSeconds": 5, "maxFailures": 9})
    assert StopPod(pod.name) not in decide(observed(status, (pod,), spec=new)).actions


def test_suspend_stops_cleanly_and_stays_stopped() -> None:
    status, pod = running()
    stop = decide(observed(status, (pod,), spec=spec(suspend=True)))
    assert StopPod(pod.name) in stop.actions
    done = replace(pod, phase=PodPhase.SUCCEEDED, exit_code=0)
    suspended = written(decide(observed(written(stop), (done,), spec=spec(suspend=True))))
    assert suspended.phase is Phase.SUSPENDED
    resumed = decide(observed(suspended, (), spec=spec(suspend=False)))
    assert written(resumed).epoch == 5


def test_deletion_waits_for_the_clean_stop_then_finishes() -> None:
    status, pod = running()
    stopping = decide(observed(status, (pod,), deleting=True))
    assert StopPod(pod.name) in stopping.actions
    assert not stopping.finished
    gone = decide(observed(written(stopping), (), deleting=True))
    assert gone.finished


def test_an_older_running_driver_is_stopped() -> None:
    status, pod = running(epoch=5)
    old = PodView(naming.driver_pod("kpis", 4), 4, PodPhase.RUNNING, "n2")
    assert StopPod(old.name) in decide(observed(status, (pod, old))).actions


def test_driver_pod_passes_spark_on_kubernetes_settings_when_executors_are_pods() -> None:
    from sluice_operator import builders

    owner = builders.Owner("kpis", "ns", "u1", "cluster-1")
    pipeline = spec(spark={"executors": {"instances": 2}})
    env = {e["name"]: e for e in builders.driver_env(owner, pipeline, 7)}
    conf = json.loads(env["SLUICE_SPARK_CONF"]["value"])
    assert conf["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"
    # Executors reach the driver at its pod's address, which it also binds.
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "$(POD_IP)"
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "kpis-e7"
    assert (
        env["SLUICE_SPARK_MASTER"]["value"]
        == "k8s://https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"
    )
    template = json.loads(env["SLUICE_EXECUTOR_POD_TEMPLATE"]["value"])
    assert template["metadata"]["labels"]["sluice.dev/epoch"] == "7"
    names = [e["name"] for e in builders.driver_env(owner, pipeline, 7)]
    for variable in ("POD_NAME", "POD_IP"):  # $(POD_NAME) and $(POD_IP) expand
        assert names.index(variable) < names.index("SLUICE_SPARK_CONF")


def test_the_driver_is_told_its_ui_may_listen_on_the_network_only_where_the_platform_allows() -> (
    None
):
    def env_of(settings: Any) -> dict[str, str]:
        decision = decide(observed(Status(), spec=spec(spark={"ui": {"enabled": True}})), settings)
        pod = next(a.manifest for a in decision.actions if isinstance(a, CreatePod))
        return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}

    assert "SLUICE_UI_ON_NETWORK" not in env_of(DEFAULTS)
    assert env_of(replace(DEFAULTS, spark_ui_on_network=True))["SLUICE_UI_ON_NETWORK"] == "true"


def test_credentials_reach_the_driver_only_as_secret_references() -> None:
    from sluice_operator import builders

    owner = builders.Owner("kpis", "ns", "u1", "cluster-1")
    pipeline = spec(checkpoint={"cassandra": {"contactPoints": ["c"], "credentialsSecret": "cass"}})
    env = {e["name"]: e for e in builders.driver_env(owner, pipeline, 1)}
    user = env["SLUICE_CHECKPOINT_CASSANDRA_USERNAME"]
    assert user["valueFrom"]["secretKeyRef"] == {"name": "cass", "key": "username"}
    assert "value" not in user


def written_or_none(decision: Decision) -> Status | None:
    found = [a.status for a in decision.actions if isinstance(a, WriteStatus)]
    return found[-1] if found else None


def test_running_driver_report_moves_last_commit_at_most_every_progress_interval() -> None:
    status, pod = running(epoch=4)
    report = DriverProgress(4, batch_id=17, committed_at=NOW - timedelta(seconds=1), lag=30)
    first = written(decide(observed(status, (pod,), progress=report)))
    assert first.last_commit == LastCommit(17, report.committed_at.isoformat(), epoch=4)

    soon = DriverProgress(4, batch_id=18, committed_at=NOW + timedelta(seconds=2), lag=0)
    assert written_or_none(decide(observed(first, (pod,), progress=soon))) in (None, first)

    later = DriverProgress(4, batch_id=23, committed_at=NOW + timedelta(seconds=6), lag=0)
    assert written(decide(observed(first, (pod,), progress=later))).last_commit == LastCommit(
        23, later.committed_at.isoformat(), epoch=4
    )


def test_report_of_another_epochs_driver_is_ignored_and_before_a_first_commit_only_lag() -> None:
    status, pod = running(epoch=4)
    zombie = DriverProgress(3, batch_id=99, committed_at=NOW, lag=0)
    fresh = DriverProgress(4, batch_id=None, committed_at=None, lag=5)
    unreported = decide(observed(status, (pod,)))
    assert decide(observed(status, (pod,), progress=zombie)) == unreported
    shown = written(decide(observed(status, (pod,), progress=fresh)))
    assert shown.last_commit is None
    assert shown.lag is not None
    assert shown.lag.records == 5


def test_a_driver_waiting_out_an_outage_keeps_running_and_the_pipeline_says_for_what() -> None:
    """Issue 12 item 10: an outage is a condition and an Event, not a failure."""
    status, pod = running(epoch=4)
    waiting = DriverProgress(
        4, batch_id=None, committed_at=None, lag=10, unavailable=("cassandra",)
    )
    decision = decide(observed(status, (pod,), progress=waiting))
    assert kinds(decision).count("CreatePod") == 0
    assert "RemovePod" not in kinds(decision)
    told = [a for a in decision.actions if isinstance(a, Emit)]
    assert [(e.type, e.reason) for e in told] == [("Warning", "DependencyUnavailable")]
    first = written(decision)
    assert first.phase is Phase.RUNNING
    assert first.epoch == 4
    [condition] = [c for c in first.conditions if c["type"] == "DependenciesAvailable"]
    assert (condition["status"], condition["reason"]) == ("False", "Waiting")
    assert "cassandra" in condition["message"]

    still = decide(observed(first, (pod,), progress=waiting))
    assert not [a for a in still.actions if isinstance(a, Emit)], "one Event per change"

    back = DriverProgress(4, batch_id=None, committed_at=None, lag=10)
    recovered = decide(observed(first, (pod,), progress=back))
    assert [(e.type, e.reason) for e in recovered.actions if isinstance(e, Emit)] == [
        ("Normal", "DependencyBack")
    ]
    [condition] = [c for c in written(recovered).conditions if c["type"] == "DependenciesAvailable"]
    assert condition["status"] == "True"


def test_records_lost_to_retention_are_a_condition_and_an_event_naming_the_partition() -> None:
    """Issue 12 item 4: the loss is visible where users look, not only in a log."""
    status, pod = running(epoch=4)
    lost = DriverProgress(4, batch_id=None, committed_at=None, lag=0, lost=(("ui/3", 50),))
    first = decide(observed(status, (pod,), progress=lost))
    assert [(e.type, e.reason) for e in first.actions if isinstance(e, Emit)] == [
        ("Warning", "RecordsLost")
    ]
    [condition] = [c for c in written(first).conditions if c["type"] == "RecordsLost"]
    assert "ui/3 50" in condition["message"]
    again = decide(observed(written(first), (pod,), progress=lost))
    assert not [a for a in again.actions if isinstance(a, Emit)], "one Event per new loss"


def test_a_checkpoint_beyond_a_partitions_end_is_a_condition_and_an_event_with_offsets() -> None:
    """Issue 12 item 5: a recreated topic, read again from its start, is told where
    users look, naming partition and offsets."""
    status, pod = running(epoch=4)
    reset = OffsetReset("ui/0", 1, committed=200, resumed_at=0)
    progress = DriverProgress(4, batch_id=None, committed_at=None, lag=0, resets=(reset,))
    first = decide(observed(status, (pod,), progress=progress))
    assert [(e.type, e.reason) for e in first.actions if isinstance(e, Emit)] == [
        ("Warning", "OffsetOutOfRange")
    ]
    [condition] = [c for c in written(first).conditions if c["type"] == "OffsetOutOfRange"]
    assert condition["reason"] == "BeyondEndOffset"
    assert "ui/0 committed 200, read again from 0" in condition["message"]
    again = decide(observed(written(first), (pod,), progress=progress))
    assert not [a for a in again.actions if isinstance(a, Emit)], "one Event per new reset"


def test_conditions_say_which_generation_of_the_spec_they_are_about() -> None:
    status, pod = running()
    decision = decide(observed(status, (pod,), generation=7))
    conditions = written(decision).conditions
    assert conditions
    assert {c["type"]: c["observedGeneration"] for c in conditions} == {
        c["type"]: 7 for c in conditions
    }


def test_the_drivers_lag_is_in_the_status_refreshed_at_most_every_progress_interval() -> None:
    """Issue 15 item 5: lag where users look (``kubectl get sp`` column Lag)."""
    status, pod = running(epoch=4)

    def report(lag: int) -> DriverProgress:
        return DriverProgress(4, batch_id=None, committed_at=None, lag=lag)

    first = written(decide(observed(status, (pod,), progress=report(120))))
    assert first.lag is not None
    assert first.lag.records == 120
    same = decide(observed(first, (pod,), progress=report(120), now=NOW + timedelta(seconds=30)))
    assert not [a for a in same.actions if isinstance(a, WriteStatus)], "no write while it stays"
    soon = decide(observed(first, (pod,), progress=report(90), now=NOW + timedelta(seconds=2)))
    assert not [a for a in soon.actions if isinstance(a, WriteStatus)], "at most one per interval"
    later = written(
        decide(observed(first, (pod,), progress=report(90), now=NOW + timedelta(seconds=6)))
    )
    assert later.lag is not None
    assert later.lag.records == 90


# -- when to look again -------------------------------------------------------------


def test_a_running_pipeline_is_looked_at_every_progress_interval() -> None:
    """An idle Running pipeline is not reconciled every second: its loop waits
    ``progress_seconds`` (the pace of its lastCommit updates); changes wake it."""
    status, pod = running()
    settled = written(decide(observed(status, (pod,))))  # its Ready condition, once
    decision = decide(observed(settled, (pod,)))
    assert decision.requeue_after == DEFAULTS.progress_seconds
    assert not decision.actions  # and nothing is written while nothing changed


def test_a_not_ready_node_brings_the_next_look_to_when_failover_is_due() -> None:
    status, pod = running()
    pod = replace(pod, running_since=NOW - timedelta(seconds=DEFAULTS.stable_seconds + 1))
    grace = spec().failover.node_lost_seconds
    since = NOW - timedelta(seconds=grace - 1.5)
    nodes = {"n1": NodeView("n1", False, since), "n2": NodeView("n2", True)}
    decision = decide(observed(status, (pod,), nodes=nodes))
    assert decision.requeue_after == pytest.approx(1.5)
    assert not [a for a in decision.actions if isinstance(a, RemovePod)]
    (replacement,) = [a for a in decision.actions if isinstance(a, CreatePod)]
    assert replacement.manifest["metadata"]["name"] == "kpis-driver-5", "a replacement, ahead"
    due = decide(observed(status, (pod,), nodes=nodes, now=NOW + timedelta(seconds=1.5)))
    assert "CreatePod" in kinds(due)  # failover at the requeue it asked for


def test_a_restart_back_off_is_waited_out_in_one_requeue() -> None:
    status, pod = exited(1, {"message": "sink down"})
    patient = spec(restart={"maxFailures": 10})
    after = written(decide(observed(replace(status, failures=4), (pod,), spec=patient)))
    assert after.failures == 5
    delay = restart_delay(patient, 5)
    assert delay > DEFAULTS.requeue_seconds * 5  # longer than the old cap on one wait
    assert after.next_start_at == (NOW + timedelta(seconds=delay)).isoformat()
    waiting = decide(observed(after, (pod,), spec=patient, now=NOW + timedelta(seconds=1)))
    assert waiting.requeue_after == pytest.approx(delay - 1)
    assert "CreatePod" not in kinds(waiting)


def test_a_failed_pipeline_waits_for_a_change_not_a_timer() -> None:
    status, pod = exited(2, {"message": "bad option"})
    failed = written(decide(observed(status, (pod,))))
    assert failed.phase is Phase.FAILED
    assert decide(observed(failed, ())).requeue_after is None


# -- pods that never start ------------------------------------------------------------


def pending(waiting: str = "", message: str = "", age: float = 30.0) -> tuple[Status, PodView]:
    status, pod = running()
    return replace(status, phase=Phase.STARTING), replace(
        pod,
        phase=PodPhase.PENDING,
        running_since=None,
        created_at=NOW - timedelta(seconds=age),
        waiting=waiting,
        waiting_message=message,
    )


def condition(status: Status, kind: str) -> dict[str, Any] | None:
    return next((c for c in status.conditions if c["type"] == kind), None)


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("ImagePullBackOff", 'Back-off pulling image "sluice-job:nope"'),
        ("CreateContainerConfigError", 'secret "kafka-creds" not found'),
        ("Unschedulable", "0/2 nodes are available: 2 node(s) didn't match selector"),
    ],
)
def test_a_driver_pod_that_waits_for_a_user_says_why_once(reason: str, message: str) -> None:
    status, pod = pending(reason, message)
    decision = decide(observed(status, (pod,)))
    after = written(decision)
    started = condition(after, "DriverStarted")
    assert started is not None
    assert (started["status"], started["reason"]) == ("False", reason)
    assert message in started["message"]
    told = [a for a in decision.actions if isinstance(a, Emit)]
    assert [(e.type, e.reason) for e in told] == [("Warning", "DriverNotStarting")]
    assert message in told[0].message
    again = decide(observed(after, (pod,)))
    assert not [a for a in again.actions if isinstance(a, Emit)]  # once, not per look
    assert after.phase is Phase.STARTING


def test_a_pod_still_pending_at_the_start_deadline_is_a_failure() -> None:
    deadline = spec().restart.start_deadline_seconds
    status, pod = pending("ImagePullBackOff", "image not found", age=deadline + 1)
    decision = decide(observed(status, (pod,)))
    after = written(decision)
    assert RemovePod(pod.name) in decision.actions
    assert after.failures == 1
    assert after.epoch == pod.epoch + 1  # the first failure restarts at once
    assert f"did not start within {deadline}s (ImagePullBackOff: image not found)" in after.message
    early_status, early = pending("ImagePullBackOff", "x", age=deadline - 1)
    before = decide(observed(early_status, (early,)))
    assert RemovePod(early.name) not in before.actions
    assert written(before).failures == 0


@pytest.mark.parametrize(
    ("commits", "lag", "forgiven"),
    [(0, 500, False), (None, None, False), (3, 500, True), (0, 0, True)],
)
def test_failures_in_a_row_are_forgiven_once_the_driver_commits_or_has_nothing_to_read(
    commits: int | None, lag: int | None, forgiven: bool
) -> None:
    """A driver Running longer than ``stable_seconds`` that has neither committed nor
    caught up (a transform raising on its first batch after a slow Spark start) keeps
    the count: on the old code it was reset, and a pipeline whose driver failed a
    minute after its start looped for ever without becoming Failed."""
    status, pod = running()
    pod = replace(pod, running_since=NOW - timedelta(seconds=DEFAULTS.stable_seconds + 1))
    report = DriverProgress(pod.epoch, None, None, lag, commits=commits, claimed=True)
    after = written(decide(observed(replace(status, failures=3), (pod,), progress=report)))
    assert (after.failures == 0) is forgiven
    unread = written(decide(observed(replace(status, failures=3), (pod,))))
    assert unread.failures == 0, "a driver whose metrics are not read: by its time"


def test_pods_that_never_start_end_failed_after_max_failures() -> None:
    deadline = spec().restart.start_deadline_seconds
    status, pod = pending("Unschedulable", "no node", age=deadline + 1)
    last = spec().restart.max_failures - 1
    decision = decide(observed(replace(status, failures=last), (pod,)))
    after = written(decision)
    assert after.phase is Phase.FAILED
    assert RemovePod(pod.name) in decision.actions
    assert "CreatePod" not in kinds(decision)


def test_a_refused_pod_is_one_failure_with_a_back_off_not_a_new_epoch_per_look() -> None:
    status, _ = running()
    obs = observed(Status(phase=Phase.STARTING, epoch=status.epoch, driver_pod=status.driver_pod))
    decision = after_rejection(
        obs, obs.status, 'pods "kpis-driver-4" is forbidden: violates PodSecurity'
    )
    after = written(decision)
    assert (after.failures, after.epoch, after.driver_pod) == (1, status.epoch, None)
    assert after.next_start_at is not None
    assert "forbidden" in after.message
    assert "CreatePod" not in kinds(decision)
    assert next(a.reason for a in decision.actions if isinstance(a, Emit)) == "DriverRejected"
    waiting = decide(observed(after, ()))
    assert "CreatePod" not in kinds(waiting)
    assert waiting.requeue_after is not None
    last = replace(obs.status, failures=spec().restart.max_failures - 1)
    assert written(after_rejection(obs, last, "forbidden")).phase is Phase.FAILED


def test_a_new_driver_with_executors_lists_its_executors_secrets_in_the_status_first() -> None:
    """The chart's admission policy reads ``status.executorSecrets``: written with the
    epoch, before the driver (which creates the executors) exists."""
    with_executors = spec(spark={"executors": {"instances": 1}})
    decision = decide(observed(Status(), spec=with_executors))
    kinds = [type(a) for a in decision.actions]
    written = next(a.status for a in decision.actions if isinstance(a, WriteStatus))
    assert kinds.index(WriteStatus) < kinds.index(CreatePod)
    assert written.executor_secrets == (naming.spark_auth_secret("kpis"),)
    alone = next(a.status for a in decide(observed(Status())).actions if isinstance(a, WriteStatus))
    assert alone.executor_secrets is None


def test_a_driver_started_before_executor_secrets_were_written_gets_them() -> None:
    with_executors = spec(spark={"executors": {"instances": 1}})
    pod = PodView(naming.driver_pod("kpis", 1), 1, PodPhase.RUNNING, "n1")
    running = Status(
        phase=Phase.RUNNING,
        epoch=1,
        driver_pod=pod.name,
        spec_hash=changes.spec_hash(with_executors),
    )
    decision = decide(observed(running, (pod,), spec=with_executors))
    written = next(a.status for a in decision.actions if isinstance(a, WriteStatus))
    assert written.executor_secrets == (naming.spark_auth_secret("kpis"),)
