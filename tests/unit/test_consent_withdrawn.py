"""Consent re-checked while a driver runs (issue 38, finding 2): the operator reads the
Secrets of the spec a running driver was started with every
``consent_recheck_seconds``; a refusal then (the label taken off, the allowed
endpoints narrowed, the type refused) stops the driver cleanly and cancels its
standby, and the pipeline waits for consent as one that never started does. On the
old code the Secrets were read only before a pod was created, so nothing here
stopped a running driver (``tests/integration/test_operator_starts.py`` shows it on
the real control plane)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sluice_operator import changes, naming
from sluice_operator.actions import CreatePod, Decision, Emit, RemovePod, StopPod, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.model import (
    Phase,
    PodPhase,
    PodView,
    Standby,
    StandbyPurpose,
    StandbyState,
    Status,
)
from tests.support.observations import NOW, observed, spec, standby_pod

pytestmark = pytest.mark.unit

REFUSED = ("Secret 'api-token' (transform.optionsFrom[0].secret) lacks the label x=y",)


def driver(**fields: Any) -> PodView:
    values: dict[str, Any] = {
        "phase": PodPhase.RUNNING,
        "node": "n1",
        "running_since": NOW - timedelta(minutes=5),
        **fields,
    }
    return PodView(naming.driver_pod("kpis", 4), 4, **values)


def running(**fields: Any) -> Status:
    values: dict[str, Any] = {
        "phase": Phase.RUNNING,
        "epoch": 4,
        "driver_pod": naming.driver_pod("kpis", 4),
        "image": "sluice-job:v1",
        "spec_hash": changes.spec_hash(spec()),
        "observed_generation": 1,
        **fields,
    }
    return Status(**values)


def of(decision: Decision, kind: type[Any]) -> list[Any]:
    return [a for a in decision.actions if isinstance(a, kind)]


def written(decision: Decision) -> Status:
    return of(decision, WriteStatus)[-1].status


def test_a_withdrawn_consent_stops_the_running_driver_and_says_which_secret() -> None:
    decision = decide(
        observed(running(), (driver(),), secret_refusals=REFUSED, consent_rechecked=True)
    )
    assert of(decision, StopPod) == [StopPod(naming.driver_pod("kpis", 4))]
    assert not of(decision, CreatePod)
    [told] = [e for e in of(decision, Emit) if e.reason == "SecretNotUsable"]
    assert told.type == "Warning"
    assert "stopping kpis-driver-4" in told.message
    assert "'api-token'" in told.message
    status = written(decision)
    usable = next(c for c in status.conditions if c["type"] == "SecretsUsable")
    assert (usable["status"], usable["reason"]) == ("False", "NotLabelled")
    assert status.phase is Phase.STOPPING
    assert status.epoch == 4


def test_a_driver_already_stopping_is_not_asked_again_nor_told_twice() -> None:
    first = written(
        decide(observed(running(), (driver(),), secret_refusals=REFUSED, consent_rechecked=True))
    )
    again = decide(
        observed(first, (driver(deleting=True),), secret_refusals=REFUSED, consent_rechecked=True)
    )
    assert not of(again, StopPod)
    assert not [e for e in of(again, Emit) if e.reason == "SecretNotUsable"]


def test_consent_that_holds_leaves_the_driver_running() -> None:
    decision = decide(observed(running(), (driver(),), consent_rechecked=True))
    assert not of(decision, StopPod)


def test_refusals_not_read_for_the_running_spec_do_not_stop_it() -> None:
    """Refusals read for a new spec (an upgrade waiting for its Secrets) are not the
    running driver's: it is stopped for the upgrade, or kept through a warm handover,
    as before."""
    decision = decide(observed(running(), (driver(),), secret_refusals=REFUSED))
    assert not [e for e in of(decision, Emit) if e.reason == "SecretNotUsable"]


def test_a_hot_standby_is_cancelled_with_the_driver() -> None:
    hot = spec(standby=1)
    standby = Standby(
        naming.driver_pod("kpis", 5),
        5,
        changes.spec_hash(hot),
        "sluice-job:v1",
        StandbyState.READY,
        purpose=StandbyPurpose.FAILOVER,
    )
    status = running(spec_hash=changes.spec_hash(hot), standby=standby)
    decision = decide(
        observed(
            status,
            (driver(), standby_pod(5)),
            spec=hot,
            secret_refusals=REFUSED,
            consent_rechecked=True,
        )
    )
    assert of(decision, StopPod) == [StopPod(naming.driver_pod("kpis", 4))]
    assert RemovePod(naming.driver_pod("kpis", 5)) in decision.actions  # it never claimed
    record = written(decision).standby
    assert record is not None
    assert record.state is StandbyState.CANCELLED


def test_once_stopped_the_pipeline_waits_for_consent_without_a_new_epoch() -> None:
    ended = driver(phase=PodPhase.SUCCEEDED, exit_code=0)
    stopping = replace(running(), phase=Phase.STOPPING)
    decision = decide(observed(stopping, (ended,), secret_refusals=REFUSED))
    assert not of(decision, CreatePod)
    status = written(decision)
    assert status.epoch == 4
    assert status.message.startswith("no driver started")
