"""The standby driver of a warm handover, up to its claim (``sluice_job.standby``):
when it may claim, how it waits for the previous driver's release, and the handover
gap it records once it has committed."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from cassandra.cluster import NoHostAvailable

from sluice_job import metrics
from sluice_job.checkpoint import Batch, Checkpoint
from sluice_job.ports import Committed
from sluice_job.standby import HandoverGap, Predecessor, Turn, turn, wait_for_turn

pytestmark = pytest.mark.unit

OLD = uuid.uuid4()
COMMITTED_AT = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)


def row(epoch: int = 4, *, released: bool = False, batch_id: int = 41) -> Checkpoint:
    return Checkpoint(batch_id, {}, epoch, OLD, "job:v1", released)


def test_a_standby_claims_only_once_the_previous_epoch_released() -> None:
    assert turn(row(released=False), 5, waited=3, timeout=30) is Turn.WAIT
    assert turn(row(released=True), 5, waited=3, timeout=30) is Turn.CLAIM


def test_after_the_stop_timeout_it_claims_anyway_and_fences_the_old_driver() -> None:
    assert turn(row(released=False), 5, waited=30, timeout=30) is Turn.FENCE


def test_a_pipeline_never_held_or_held_by_a_newer_epoch_is_left_to_the_claim() -> None:
    never = Checkpoint(0, {}, 0, None, "", released=False)
    assert turn(never, 5, waited=0, timeout=30) is Turn.CLAIM
    assert turn(row(epoch=7), 5, waited=0, timeout=30) is Turn.CLAIM, "the claim says fenced"


@dataclass
class Rows:
    """The checkpoint row as successive reads see it; a read may fail (an outage)."""

    seen: list[Checkpoint | Exception]
    reads: int = 0
    clock: list[float] = field(default_factory=lambda: [0.0])

    def load(self, *, serial: bool = False) -> Checkpoint:
        self.reads += 1
        self.clock[0] += 1.0
        item = self.seen[min(self.reads, len(self.seen)) - 1]
        if isinstance(item, Exception):
            raise item
        return item


def test_it_polls_until_the_release_then_returns_the_previous_drivers_last_commit() -> None:
    rows = Rows([row(), row(), NoHostAvailable("away", {}), row(released=True, batch_id=42)])
    found = wait_for_turn(
        rows,
        5,
        threading.Event(),
        timeout=30,
        last_commit=lambda batch_id: COMMITTED_AT if batch_id == 42 else None,
        clock=lambda: rows.clock[0],
        poll=0,
    )
    assert found == Predecessor(4, 42, COMMITTED_AT, Turn.CLAIM)
    assert rows.reads == 4, "a read during a Cassandra outage is tried again"


def test_it_fences_when_the_release_does_not_come_within_the_stop_timeout() -> None:
    rows = Rows([row()])
    found = wait_for_turn(
        rows, 5, threading.Event(), timeout=10, clock=lambda: rows.clock[0], poll=0
    )
    assert found is not None
    assert found.turn is Turn.FENCE
    assert rows.reads == 10


def test_asked_to_stop_before_its_turn_it_claims_nothing() -> None:
    stop = threading.Event()
    stop.set()
    rows = Rows([row(released=True)])
    assert wait_for_turn(rows, 5, stop, timeout=30, poll=0) is None
    assert rows.reads == 0


def test_a_failure_that_is_not_an_outage_ends_the_wait() -> None:
    with pytest.raises(ValueError, match="row format"):
        wait_for_turn(Rows([ValueError("row format 9")]), 5, threading.Event(), 30, poll=0)


def test_the_gap_runs_from_the_previous_last_commit_to_the_first_commit() -> None:
    gap = HandoverGap(
        "ns/p",
        5,
        Predecessor(4, 41, COMMITTED_AT, Turn.CLAIM),
        wall=lambda: COMMITTED_AT + timedelta(seconds=1.25),
    )
    first = Committed(Batch(42, (), {}), None, 0.5, 0.01)
    gap.committed(first)
    assert gap.gap == pytest.approx(1.25)
    assert metrics.HANDOVER_GAP.labels("ns/p")._value.get() == pytest.approx(1.25)
    gap.wall = lambda: COMMITTED_AT + timedelta(seconds=9)
    gap.committed(Committed(Batch(43, (), {}), None, 0.5, 0.01))
    assert gap.gap == pytest.approx(1.25), "only the first commit after the handover counts"


def test_a_promoted_upgrade_standby_fences_at_once_instead_of_after_the_stop_timeout() -> None:
    """The operator promotes it when the old driver's node is lost: no release will come."""
    rows = Rows([row(released=False)])
    promoted = threading.Event()
    promoted.set()
    predecessor = wait_for_turn(
        rows, 5, threading.Event(), 300.0, clock=lambda: rows.clock[0], poll=0, promoted=promoted
    )
    assert predecessor is not None
    assert predecessor.turn is Turn.FENCE
    assert rows.reads == 1, "at the first look, not after 300 s"
