"""The micro-batch loop's rules, with hand-written fakes for its three ports."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from sluice_job.checkpoint import Batch, Checkpoint, FencedError
from sluice_job.offsets import OffsetRange, TopicPartition, Watermarks
from sluice_job.planner import Policy
from sluice_job.runner import PhaseTimes, Runner
from sluice_job.spec import OnOffsetOutOfRange, StartingOffsets

pytestmark = pytest.mark.unit
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


@dataclass
class FakeStore:
    checkpoint: Checkpoint = field(default_factory=lambda: Checkpoint(0, {}, 0, None, "", False))
    planned: list[Batch] = field(default_factory=list)
    committed: list[Batch] = field(default_factory=list)
    released: bool = False
    fence_at_commit: int | None = None

    def claim(self, epoch: int) -> Checkpoint:
        return self.checkpoint

    def plan(self, batch: Batch) -> None:
        self.planned.append(batch)

    def commit(self, batch: Batch, started_at: datetime) -> None:
        if batch.batch_id == self.fence_at_commit:
            raise FencedError("newer epoch")
        self.committed.append(batch)

    def release(self) -> bool:
        self.released = True
        return True


@dataclass
class FakeWatermarks:
    marks: dict[TopicPartition, Watermarks]

    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]:
        return dict(self.marks)


@dataclass
class FakeExecutor:
    """Executes batches; stops the runner once the backlog is drained."""

    stop: threading.Event
    marks: dict[TopicPartition, Watermarks]
    executed: list[Batch] = field(default_factory=list)
    fail_at: int | None = None

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        if batch.batch_id == self.fail_at:
            raise RuntimeError("sink down")
        self.executed.append(batch)
        if all(batch.positions.get(tp) == m.high for tp, m in self.marks.items()):
            self.stop.set()
        return PhaseTimes(0.0, 0.0, 0.0, batch.records)


def runner(store: FakeStore, marks: dict[TopicPartition, Watermarks], cap: int = 10) -> Runner:
    stop = threading.Event()
    return Runner(
        epoch=2,
        topics=["t"],
        policy=Policy(StartingOffsets.EARLIEST, OnOffsetOutOfRange.FAIL, cap),
        interval=0.0,
        store=store,
        watermarks=FakeWatermarks(marks),
        executor=FakeExecutor(stop, marks),
        stop=stop,
    )


def test_backlog_is_drained_in_capped_batches_planned_before_read() -> None:
    marks = {TP0: Watermarks(0, 35), TP1: Watermarks(0, 5)}
    store = FakeStore()
    loop = runner(store, marks, cap=10)
    loop.run()
    assert [b.batch_id for b in store.committed] == [1, 2, 3, 4]
    assert all(r.count <= 10 for b in store.committed for r in b.ranges)
    assert store.committed[-1].positions == {TP0: 35, TP1: 5}
    assert store.planned == store.committed
    assert store.released


def test_failed_batch_is_not_committed_and_nothing_after_it_is_planned() -> None:
    marks = {TP0: Watermarks(0, 50)}
    store = FakeStore()
    loop = runner(store, marks)
    assert isinstance(loop.executor, FakeExecutor)
    loop.executor.fail_at = 2
    with pytest.raises(RuntimeError, match="sink down"):
        loop.run()
    assert [b.batch_id for b in store.committed] == [1]
    assert [b.batch_id for b in store.planned] == [1, 2]
    assert not store.released


def test_a_planned_batch_left_by_a_crash_is_executed_exactly_as_planned() -> None:
    marks = {TP0: Watermarks(0, 100)}
    planned = Batch(8, (OffsetRange(TP0, 70, 73),), {TP0: 73})
    store = FakeStore(Checkpoint(7, {TP0: 70}, 1, None, "v1", False, planned=planned))
    loop = runner(store, marks, cap=10)
    loop.run()
    assert store.committed[0] == planned
    assert store.committed[1].ranges[0].start == 73
    assert planned not in store.planned  # it was planned by the previous driver


def test_fenced_commit_stops_the_loop_without_release() -> None:
    store = FakeStore(fence_at_commit=1)
    with pytest.raises(FencedError):
        runner(store, {TP0: Watermarks(0, 5)}).run()
    assert store.committed == []
    assert not store.released


def test_stop_before_any_data_releases_cleanly() -> None:
    store = FakeStore()
    loop = runner(store, {TP0: Watermarks(0, 0)})
    loop.stop.set()
    loop.run()
    assert store.committed == []
    assert store.released
