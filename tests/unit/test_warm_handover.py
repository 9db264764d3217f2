"""Warm handover (``spec.upgrade.mode: WarmHandover``): the operator's decisions, on
hand-made observations. The new spec's driver starts as a standby while the old one
runs; the old one is stopped only once the standby is ready, and the standby becomes
the current driver when the old one has exited. A standby that never gets ready
fails the upgrade and leaves the old driver running."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sluice_api import env
from sluice_api.exitcodes import ExitCode
from sluice_api.termination import Termination
from sluice_operator import changes, naming
from sluice_operator.actions import CreatePod, Decision, Emit, RemovePod, StopPod, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.handover import UPGRADE_FAILED
from sluice_operator.model import (
    Phase,
    PodPhase,
    PodView,
    Standby,
    StandbyState,
    Status,
    StopReason,
)
from sluice_operator.progress import DriverProgress
from tests.support.observations import NOW, observed, spec, standby_pod

pytestmark = pytest.mark.unit

WARM = {"mode": "WarmHandover", "stopTimeoutSeconds": 30}
V1 = spec(upgrade=WARM)
V2 = spec(image="sluice-job:v2", upgrade=WARM)
V3 = spec(image="sluice-job:v3", upgrade=WARM)


def running(epoch: int = 4) -> tuple[Status, PodView]:
    pod = PodView(
        naming.driver_pod("kpis", epoch),
        epoch,
        PodPhase.RUNNING,
        "n1",
        running_since=NOW - timedelta(minutes=5),
        ip="10.0.0.4",
    )
    status = Status(
        phase=Phase.RUNNING,
        epoch=epoch,
        driver_pod=pod.name,
        image="sluice-job:v1",
        spec_hash=changes.spec_hash(V1),
        observed_generation=1,
    )
    return status, pod


def ready(epoch: int = 5) -> DriverProgress:
    return DriverProgress(epoch, None, None, None, standby_ready=True)


def kinds(decision: Decision) -> list[str]:
    return [type(a).__name__ for a in decision.actions]


def written(decision: Decision) -> Status:
    return [a.status for a in decision.actions if isinstance(a, WriteStatus)][-1]


def events(decision: Decision) -> dict[str, str]:
    return {a.reason: a.message for a in decision.actions if isinstance(a, Emit)}


def created(decision: Decision) -> dict[str, Any]:
    (pod,) = [a.manifest for a in decision.actions if isinstance(a, CreatePod)]
    return pod


def _environment(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def starting() -> tuple[Status, PodView, Decision]:
    """The spec changed to V2 while epoch 4 runs V1: a standby of epoch 5 is started."""
    status, pod = running()
    return status, pod, decide(observed(status, (pod,), spec=V2, generation=2))


def test_a_spec_change_starts_the_new_driver_in_standby_and_leaves_the_old_one_running() -> None:
    _status, pod, decision = starting()
    order = kinds(decision)
    assert "StopPod" not in order, "the running driver is not asked to stop yet"
    assert order.index("WriteStatus") < order.index("CreatePod"), "the epoch is written ahead"
    after = written(decision)
    assert after.standby == Standby(
        "kpis-driver-5",
        5,
        changes.spec_hash(V2),
        "sluice-job:v2",
        StandbyState.STARTING,
        since=NOW.isoformat(),
    )
    assert (after.epoch, after.driver_pod, after.image) == (4, pod.name, "sluice-job:v1")
    assert after.phase is Phase.RUNNING
    manifest = created(decision)
    assert manifest["metadata"]["name"] == "kpis-driver-5"
    assert manifest["metadata"]["labels"][naming.LABEL_EPOCH] == "5"
    assert manifest["metadata"]["labels"][naming.LABEL_PIPELINE] == "kpis"
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert manifest["spec"]["containers"][0]["image"] == "sluice-job:v2"
    assert _environment(manifest)[env.STANDBY] == "1"
    assert _environment(manifest)[env.EPOCH] == "5"
    assert "StandbyCreated" in events(decision)


def test_the_default_mode_stays_a_clean_stop() -> None:
    status, pod = running()
    decision = decide(observed(status, (pod,), spec=spec(image="sluice-job:v2"), generation=2))
    assert StopPod(pod.name) in decision.actions
    assert "CreatePod" not in kinds(decision)
    assert written(decision).standby is None


def test_until_the_standby_is_ready_the_old_driver_keeps_running() -> None:
    _, pod, decision = starting()
    waiting = written(decision)
    for report in (None, DriverProgress(5, None, None, None), ready(epoch=3)):
        look = decide(
            observed(waiting, (pod, standby_pod()), spec=V2, generation=2, standby_progress=report)
        )
        assert not any(isinstance(a, (StopPod, RemovePod, CreatePod)) for a in look.actions)
        assert look.requeue_after is not None
        assert look.requeue_after <= 2.0


def test_a_ready_standby_has_the_old_driver_stopped_cleanly() -> None:
    _, pod, decision = starting()
    look = decide(
        observed(
            written(decision),
            (pod, standby_pod()),
            spec=V2,
            generation=2,
            standby_progress=ready(),
        )
    )
    assert StopPod(pod.name) in look.actions
    assert not any(isinstance(a, StopPod) and a.name == "kpis-driver-5" for a in look.actions)
    after = written(look)
    assert after.standby is not None
    assert after.standby.state is StandbyState.READY
    assert (after.phase, after.stop_reason) == (Phase.UPGRADING, StopReason.UPGRADE)
    assert "HandingOver" in events(look)


def handing_over() -> tuple[Status, PodView]:
    _, pod, decision = starting()
    look = decide(
        observed(
            written(decision), (pod, standby_pod()), spec=V2, generation=2, standby_progress=ready()
        )
    )
    return written(look), replace(pod, deleting=True)


@pytest.mark.parametrize("code", [ExitCode.CLEAN_STOP, ExitCode.FENCED, ExitCode.FAILURE])
def test_when_the_old_driver_has_exited_the_standby_is_the_current_driver(code: int) -> None:
    """Exit 0 is the release; 3: the standby fenced it after the stop timeout; 1: its
    own watchdog gave up. The standby takes over in every case: no new pod, no restart."""
    status, old = handing_over()
    message = Termination(ExitCode(code), "Test", "", last_batch_id=41).to_json()
    gone = replace(old, phase=PodPhase.SUCCEEDED if code == 0 else PodPhase.FAILED)
    gone = replace(gone, exit_code=code, message=message, finished_at=NOW)
    decision = decide(observed(status, (gone, standby_pod()), spec=V2, generation=2))
    assert "CreatePod" not in kinds(decision)
    assert RemovePod(old.name) in decision.actions
    assert not any(a.name == "kpis-driver-5" for a in decision.actions if hasattr(a, "name"))
    after = written(decision)
    assert (after.epoch, after.driver_pod, after.image) == (5, "kpis-driver-5", "sluice-job:v2")
    assert after.spec_hash == changes.spec_hash(V2)
    assert (after.standby, after.stop_reason, after.restarts) == (None, None, 0)
    assert after.last_commit is not None
    assert after.last_commit.batch_id == 41
    assert "HandedOver" in events(decision)
    steady = decide(observed(after, (standby_pod(),), spec=V2, generation=2))
    assert written(steady).phase is Phase.RUNNING
    assert not any(isinstance(a, (StopPod, RemovePod, CreatePod)) for a in steady.actions)


def test_the_old_drivers_node_lost_during_the_handover_promotes_the_standby() -> None:
    status, old = handing_over()
    lost = {"n2": observed(status).nodes["n2"]}  # n1 is gone from the cluster
    decision = decide(observed(status, (old, standby_pod()), spec=V2, generation=2, nodes=lost))
    assert written(decision).driver_pod == "kpis-driver-5"
    assert RemovePod(old.name) in decision.actions


def failed_standby(code: int = 2, reason: str = "TransformCheckFailed") -> PodView:
    said = Termination(ExitCode(code), reason, "the transform fails on an empty batch").to_json()
    return standby_pod(phase=PodPhase.FAILED, exit_code=code, message=said)


def test_a_standby_that_exits_fails_the_upgrade_and_the_old_driver_keeps_running() -> None:
    _, pod, decision = starting()
    look = decide(observed(written(decision), (pod, failed_standby()), spec=V2, generation=2))
    assert RemovePod("kpis-driver-5") in look.actions, "the failed standby is cleaned up"
    assert not any(isinstance(a, StopPod) for a in look.actions)
    after = written(look)
    assert (after.epoch, after.driver_pod, after.phase) == (4, pod.name, Phase.RUNNING)
    assert after.standby is not None
    assert after.standby.state is StandbyState.FAILED
    (condition,) = [c for c in after.conditions if c["type"] == UPGRADE_FAILED]
    assert condition["status"] == "True"
    assert "sluice-job:v2" in condition["message"]
    assert "the transform fails on an empty batch" in condition["message"]
    assert "exited 2" in condition["message"]
    told = events(look)[UPGRADE_FAILED]
    assert "the transform fails on an empty batch" in told
    assert pod.name in told
    ready_condition = next(c for c in after.conditions if c["type"] == "Ready")
    assert ready_condition["status"] == "True"

    again = decide(observed(after, (pod,), spec=V2, generation=2))
    assert "CreatePod" not in kinds(again), "the same spec is not tried again"
    assert not any(isinstance(a, StopPod) for a in again.actions)

    retry = decide(observed(after, (pod,), spec=V3, generation=3))
    standby = written(retry).standby
    assert standby is not None
    assert (standby.epoch, standby.image, standby.state) == (
        6,
        "sluice-job:v3",
        StandbyState.STARTING,
    ), "a changed spec is tried, with an epoch above the failed standby's"
    (condition,) = [c for c in written(retry).conditions if c["type"] == UPGRADE_FAILED]
    assert condition["status"] == "False"


def test_a_standby_not_ready_by_the_start_deadline_fails_the_upgrade() -> None:
    _, pod, decision = starting()
    late = standby_pod(age=301)
    look = decide(observed(written(decision), (pod, late), spec=V2, generation=2))
    assert RemovePod(late.name) in look.actions
    assert StopPod(pod.name) not in look.actions
    after = written(look)
    assert after.standby is not None
    assert after.standby.state is StandbyState.FAILED
    assert "startDeadlineSeconds=300" in after.standby.message


def test_a_standby_ending_during_the_handover_leaves_a_clean_stop_upgrade() -> None:
    """The old driver was already asked to stop: when it exits, the new spec starts
    as after a clean stop, above the failed standby's epoch."""
    status, old = handing_over()
    look = decide(observed(status, (old, failed_standby(1, "BatchFailed")), spec=V2, generation=2))
    after = written(look)
    assert after.standby is not None
    assert after.standby.state is StandbyState.FAILED
    assert UPGRADE_FAILED in events(look)
    done = replace(old, phase=PodPhase.SUCCEEDED, exit_code=0, message="{}")
    start = decide(observed(after, (done,), spec=V2, generation=2))
    restarted = written(start)
    assert (restarted.epoch, restarted.image) == (6, "sluice-job:v2")
    assert created(start)["metadata"]["name"] == "kpis-driver-6"
    assert env.STANDBY not in _environment(created(start))


def test_a_further_spec_change_replaces_a_standby_that_is_not_ready() -> None:
    _, pod, decision = starting()
    look = decide(observed(written(decision), (pod, standby_pod()), spec=V3, generation=3))
    assert RemovePod("kpis-driver-5") in look.actions  # it never claimed
    assert StopPod(pod.name) not in look.actions
    assert created(look)["metadata"]["name"] == "kpis-driver-6"
    standby = written(look).standby
    assert standby is not None
    assert (standby.epoch, standby.image) == (6, "sluice-job:v3")


def test_the_running_driver_failing_before_the_standby_is_ready_cancels_it() -> None:
    _, pod, decision = starting()
    crashed = replace(pod, phase=PodPhase.FAILED, exit_code=1, message="{}", finished_at=NOW)
    look = decide(observed(written(decision), (crashed, standby_pod()), spec=V2, generation=2))
    assert RemovePod("kpis-driver-5") in look.actions  # it never claimed
    after = written(look)
    assert after.standby is not None
    assert after.standby.state is StandbyState.CANCELLED
    assert (after.epoch, after.driver_pod) == (6, "kpis-driver-6")
    assert created(look)["metadata"]["name"] == "kpis-driver-6"


@pytest.mark.parametrize("how", ["deleted", "suspended"])
def test_deleting_or_suspending_stops_the_standby_too(how: str) -> None:
    _, pod, decision = starting()
    kw: dict[str, Any] = (
        {"deleting": True} if how == "deleted" else {"spec": spec(suspend=True, upgrade=WARM)}
    )
    look = decide(observed(written(decision), (pod, standby_pod()), generation=2, **kw))
    assert RemovePod("kpis-driver-5") in look.actions  # it never claimed
    assert StopPod(pod.name) in look.actions


def test_a_standby_written_ahead_but_never_created_is_created() -> None:
    """The operator restarted between writing the standby's epoch and creating its pod."""
    _, pod, decision = starting()
    look = decide(observed(written(decision), (pod,), spec=V2, generation=2))
    assert created(look)["metadata"]["name"] == "kpis-driver-5"
    assert StopPod(pod.name) not in look.actions


def test_a_standby_status_survives_the_round_trip() -> None:
    _, _, decision = starting()
    after = written(decision)
    assert Status.parse(after.to_patch()) == after


def test_a_spec_back_to_the_running_one_clears_the_failed_upgrade() -> None:
    _, pod, decision = starting()
    failed = written(decide(observed(written(decision), (pod, failed_standby()), spec=V2)))
    back = written(decide(observed(failed, (pod,), spec=V1, generation=3)))
    (condition,) = [c for c in back.conditions if c["type"] == UPGRADE_FAILED]
    assert (condition["status"], condition["reason"]) == ("False", "SpecReverted")
    assert back.message == ""


def test_while_both_run_both_drivers_executors_may_name_their_secrets() -> None:
    """The chart's admission policy admits executor pods naming status.executorSecrets:
    the standby starts its own executors while the old driver's still run."""
    executors = {"instances": 1}
    old_spec = spec(upgrade=WARM, spark={"executors": executors})
    new_spec = spec(
        image="sluice-job:v2",
        upgrade=WARM,
        spark={
            "executors": executors,
            "pod": {"envFrom": [{"secretRef": {"name": "new-creds"}}]},
        },
    )
    status, pod = running()
    status = replace(
        status, spec_hash=changes.spec_hash(old_spec), executor_secrets=("kpis-spark-auth",)
    )
    after = written(decide(observed(status, (pod,), spec=new_spec, generation=2)))
    assert after.executor_secrets is not None
    assert {"kpis-spark-auth", "new-creds"} <= set(after.executor_secrets)
