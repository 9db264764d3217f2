"""Automatic rollback of a failed upgrade, on hand-made observations: the last spec
whose driver committed is kept; when the driver of a changed spec gives up, that
spec runs again (with the manifest's operator fields) until the spec changes."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sluice_api.exitcodes import ExitCode
from sluice_api.termination import Termination
from sluice_operator import changes, naming
from sluice_operator.actions import CreatePod, Decision, Emit, StopPod, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.model import GoodSpec, Phase, PodPhase, PodView, Status
from sluice_operator.progress import DriverProgress
from tests.support.observations import NOW, observed, spec

pytestmark = pytest.mark.unit

GOOD = spec()
BAD = spec(image="sluice-job:v2-broken")


def written(decision: Decision) -> Status:
    return [a.status for a in decision.actions if isinstance(a, WriteStatus)][-1]


def created(decision: Decision) -> dict[str, object]:
    (pod,) = [a.manifest for a in decision.actions if isinstance(a, CreatePod)]
    return pod


def image_of(pod: dict[str, object]) -> str:
    return pod["spec"]["containers"][0]["image"]  # type: ignore[index,no-any-return]


def good_spec() -> GoodSpec:
    view = json.dumps(changes.driver_view(GOOD), sort_keys=True)
    return GoodSpec(changes.spec_hash(GOOD), GOOD.image, view)


def failing(epoch: int = 6, failures: int = 0) -> tuple[Status, PodView]:
    """The driver of the upgrade to BAD exited 1; v1 committed before."""
    pod = PodView(
        naming.driver_pod("kpis", epoch),
        epoch,
        PodPhase.FAILED,
        "n1",
        exit_code=1,
        message=Termination(exit_code=1, reason="Error", message="transform raised").to_json(),
        finished_at=NOW,
    )
    status = Status(
        phase=Phase.RECOVERING,
        epoch=epoch,
        driver_pod=pod.name,
        image=BAD.image,
        spec_hash=changes.spec_hash(BAD),
        failures=failures,
        observed_generation=2,
        last_good=good_spec(),
    )
    return status, pod


def rolled_back() -> Status:
    """The status after the upgrade to BAD gave up and v1 was started again."""
    status, pod = failing(failures=GOOD.restart.max_failures - 1)
    return written(decide(observed(status, (pod,), spec=BAD, generation=2)))


def driver_of(status: Status, phase: PodPhase, **fields: Any) -> PodView:
    return PodView(status.driver_pod or "", status.epoch, phase, "n1", **fields)


def test_the_spec_whose_driver_commits_becomes_the_last_good_one() -> None:
    pod = PodView(naming.driver_pod("kpis", 3), 3, PodPhase.RUNNING, "n1", ip="10.0.0.1")
    status = Status(Phase.RUNNING, 3, pod.name, GOOD.image, changes.spec_hash(GOOD))
    before = DriverProgress(epoch=3, batch_id=None, committed_at=None, lag=None)
    assert written(decide(observed(status, (pod,), progress=before))).last_good is None
    after = DriverProgress(epoch=3, batch_id=7, committed_at=NOW, lag=0)
    good = written(decide(observed(status, (pod,), progress=after))).last_good
    assert good == good_spec()


def test_an_upgrade_that_gives_up_rolls_back_to_the_last_good_spec() -> None:
    status, pod = failing(failures=GOOD.restart.max_failures - 1)
    decision = decide(observed(status, (pod,), spec=BAD, generation=2))
    after = written(decision)
    assert after.phase is Phase.RECOVERING
    assert after.failures == 0
    assert after.epoch == 7
    assert after.image == GOOD.image
    assert after.spec_hash == changes.spec_hash(GOOD)
    assert after.rolled_back is not None
    assert after.rolled_back.image == BAD.image
    assert "transform raised" in after.rolled_back.reason
    assert image_of(created(decision)) == GOOD.image
    told = [a for a in decision.actions if isinstance(a, Emit) and a.reason == "RolledBack"]
    assert len(told) == 1
    assert BAD.image in told[0].message
    assert GOOD.image in told[0].message
    rolled = next(c for c in after.conditions if c["type"] == "RolledBack")
    assert (rolled["status"], rolled["reason"]) == ("True", "UpgradeFailed")


def test_a_rolled_back_pipeline_keeps_the_good_spec_until_the_spec_changes() -> None:
    after = rolled_back()
    good_pod = driver_of(after, PodPhase.RUNNING, running_since=NOW)
    later = NOW + timedelta(seconds=30)
    steady = decide(observed(after, (good_pod,), spec=BAD, generation=2, now=later))
    assert not [a for a in steady.actions if isinstance(a, (StopPod, CreatePod))]
    suspended = decide(
        observed(after, (good_pod,), spec=BAD.model_copy(update={"suspend": True}), now=later)
    )
    assert StopPod(good_pod.name) in suspended.actions  # operator fields still apply
    fixed = spec(image="sluice-job:v3")
    upgrade = decide(observed(after, (good_pod,), spec=fixed, generation=3, now=later))
    assert StopPod(good_pod.name) in upgrade.actions  # a new spec ends the rollback


def test_a_new_spec_after_a_rollback_clears_it_when_its_driver_starts() -> None:
    status, pod = failing(failures=GOOD.restart.max_failures - 1)
    after = written(decide(observed(status, (pod,), spec=BAD, generation=2)))
    stopped = replace(after, driver_pod=None)
    fixed = spec(image="sluice-job:v3")
    started = decide(observed(stopped, (), spec=fixed, generation=3))
    assert image_of(created(started)) == "sluice-job:v3"
    now = written(started)
    assert now.rolled_back is None
    rolled = next(c for c in now.conditions if c["type"] == "RolledBack")
    assert (rolled["status"], rolled["reason"]) == ("False", "SpecChanged")


def test_without_rollback_or_a_good_spec_the_pipeline_fails() -> None:
    status, pod = failing(failures=GOOD.restart.max_failures - 1)
    off = BAD.model_copy(update={"upgrade": BAD.upgrade.model_copy(update={"rollback": False})})
    assert written(decide(observed(status, (pod,), spec=off))).phase is Phase.FAILED
    never = replace(status, last_good=None)
    assert written(decide(observed(never, (pod,), spec=BAD))).phase is Phase.FAILED


def test_the_good_spec_failing_too_ends_failed_not_in_a_loop() -> None:
    rolled = rolled_back()
    crashed = driver_of(rolled, PodPhase.FAILED, exit_code=1, finished_at=NOW)
    last = replace(rolled, failures=GOOD.restart.max_failures - 1)
    final = written(decide(observed(last, (crashed,), spec=BAD, generation=2)))
    assert final.phase is Phase.FAILED


def test_an_upgrade_the_driver_refuses_as_invalid_rolls_back_at_once() -> None:
    status, pod = failing(failures=0)
    refused = replace(
        pod,
        exit_code=int(ExitCode.INVALID_CONFIG),
        message=Termination(
            exit_code=int(ExitCode.INVALID_CONFIG),
            reason="InvalidConfig",
            message="transform.entrypoint: no module named 'jobs_v2'",
        ).to_json(),
    )
    after = written(decide(observed(status, (refused,), spec=BAD, generation=2)))
    assert after.rolled_back is not None
    assert "jobs_v2" in after.rolled_back.reason
    assert after.image == GOOD.image
