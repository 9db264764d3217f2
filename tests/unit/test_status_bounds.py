"""Strings a driver reports end up in the pipeline's status, and a driver runs a
tenant's code: the status stays small whatever the driver says (issue 38, finding 8:
"driver-reported strings enter condition messages unbounded; the status schema has no
limits").

Reproduction on the old code: a driver whose termination message (or whose
``sluice_dependency_available`` labels) ran to megabytes had all of it copied into
``status.message``, the Ready condition and ``rolledBack.reason``; three thousand
distinct dependency labels became one condition message of 3,000 names; the CRD's
status schema set no ``maxLength`` on any of them, so the API server stored it all in
etcd on every status write."""

from __future__ import annotations

import pytest

from sluice_api.status import MAX_MESSAGE, bounded
from sluice_operator.crd import build_crd
from sluice_operator.model import (
    Phase,
    PodPhase,
    PodView,
    Rollback,
    Standby,
    StandbyPurpose,
    StandbyState,
    Status,
)
from sluice_operator.progress import MAX_LABEL, MAX_NAMED, DriverProgress, parse
from sluice_operator.reports import with_losses
from tests.support.observations import observed

pytestmark = pytest.mark.unit
PIPELINE = "ns/kpis"


def test_a_short_message_is_kept_as_it_is() -> None:
    assert bounded("driver exited 1: boom") == "driver exited 1: boom"


def test_a_long_message_keeps_its_start_and_says_how_much_was_cut() -> None:
    text = "Traceback: " + "x" * 100_000
    cut = bounded(text)
    assert len(cut) <= MAX_MESSAGE
    kept, said = cut.split("…")
    assert text.startswith(kept)
    assert kept.startswith("Traceback: xxx")
    assert said == f" ({len(text) - len(kept)} more characters)"


def test_every_message_the_operator_writes_is_bounded() -> None:
    huge = "y" * 1_000_000
    status = Status(
        message=huge,
        conditions=({"type": "Ready", "status": "False", "reason": "Failed", "message": huge},),
        rolled_back=Rollback("img:2", "abc", huge, "2026-11-28T00:00:00+00:00"),
        standby=Standby(
            pod="kpis-driver-3",
            epoch=3,
            spec_hash="abc",
            image="img:2",
            state=StandbyState.FAILED,
            message=huge,
            purpose=StandbyPurpose.FAILOVER,
        ),
    )
    patch = status.to_patch()
    assert len(patch["message"]) <= MAX_MESSAGE
    assert len(patch["conditions"][0]["message"]) <= MAX_MESSAGE
    assert len(patch["rolledBack"]["reason"]) <= MAX_MESSAGE
    assert len(patch["standby"]["message"]) <= MAX_MESSAGE


def test_the_status_schema_refuses_longer_messages() -> None:
    status = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "status"
    ]["properties"]
    assert status["message"]["maxLength"] == MAX_MESSAGE
    assert status["conditions"]["items"]["properties"]["message"]["maxLength"] == MAX_MESSAGE
    assert status["rolledBack"]["properties"]["reason"]["maxLength"] == MAX_MESSAGE
    assert status["standby"]["properties"]["message"]["maxLength"] == MAX_MESSAGE


def test_a_driver_naming_thousands_of_long_dependencies_and_topics_is_read_cut_short() -> None:
    lines = [f'sluice_epoch{{pipeline="{PIPELINE}"}} 4']
    lines += [
        f'sluice_dependency_available{{pipeline="{PIPELINE}",dependency="d{i:05}{"z" * 5000}"}} 0'
        for i in range(3000)
    ]
    lines += [
        f'sluice_records_skipped_total{{pipeline="{PIPELINE}",topic="t{"q" * 5000}",'
        f'partition="{i}"}} 3'
        for i in range(3000)
    ]
    progress = parse("\n".join(lines) + "\n", PIPELINE)
    assert progress is not None
    assert len(progress.unavailable) == MAX_NAMED
    assert all(len(name) <= MAX_LABEL for name in progress.unavailable)
    assert len(progress.lost) == 3000
    assert all(len(where) <= 2 * MAX_LABEL + 1 for where, _ in progress.lost)


def test_bounded_names_of_a_normal_driver_are_untouched() -> None:
    text = (
        f'sluice_epoch{{pipeline="{PIPELINE}"}} 4\n'
        f'sluice_dependency_available{{pipeline="{PIPELINE}",dependency="cassandra"}} 0\n'
        f'sluice_dependency_available{{pipeline="{PIPELINE}",dependency="kafka"}} 0\n'
    )
    progress = parse(text, PIPELINE)
    assert progress is not None
    assert progress.unavailable == ("cassandra", "kafka")


def test_a_long_loss_report_is_news_once_not_on_every_reconcile() -> None:
    """Bounded conditions are compared as they are held: a message past the bound is
    stored cut, and the same report must not count as a change (a new Event) each time."""
    pod = PodView("kpis-driver-2", 2, PodPhase.RUNNING, "n2", ip="10.0.0.7")
    lost = tuple((f"orders-{'t' * 200}/{i}", 5) for i in range(50))
    progress = DriverProgress(epoch=2, batch_id=10, committed_at=None, lag=0, lost=lost)
    status = Status(phase=Phase.RUNNING, epoch=2, driver_pod=pod.name)
    status, told = with_losses(status, pod, observed(status, (pod,), progress=progress))
    assert [e.reason for e in told] == ["RecordsLost"]
    assert all(len(c["message"]) <= MAX_MESSAGE for c in status.conditions)
    again, told = with_losses(status, pod, observed(status, (pod,), progress=progress))
    assert told == []
    assert again == status
