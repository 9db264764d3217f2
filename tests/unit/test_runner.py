"""The micro-batch loop's rules, with hand-written fakes for its three ports."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from sluice_api.offset_reset import OffsetReset
from sluice_api.source import OnOffsetOutOfRange, StartingOffsets
from sluice_job.backpressure import RateControl
from sluice_job.checkpoint import Batch, Checkpoint, FencedError
from sluice_job.offsets import OffsetRange, Positions, TopicPartition, Watermarks
from sluice_job.planner import OffsetOutOfRangeError, Policy, Skip
from sluice_job.ports import Committed, PhaseTimes
from sluice_job.runner import IDLE_MAX, IDLE_MAX_LOW_LATENCY, Runner

pytestmark = pytest.mark.unit
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


@dataclass
class FakeStore:
    checkpoint: Checkpoint = field(default_factory=lambda: Checkpoint(0, {}, 0, None, "", False))
    planned: list[Batch] = field(default_factory=list)
    committed: list[Batch] = field(default_factory=list)
    released: bool = False
    fence_at_commit: int | None = None
    resets: list[tuple[Batch, str, dict[str, object]]] = field(default_factory=list)

    def claim(self, epoch: int) -> Checkpoint:
        return self.checkpoint

    def plan(self, batch: Batch) -> None:
        self.planned.append(batch)

    def commit(self, batch: Batch, started_at: datetime) -> float:
        if batch.batch_id == self.fence_at_commit:
            raise FencedError("newer epoch")
        self.committed.append(batch)
        return 0.001

    def reset(self, batch: Batch, reset_id: str, record: str) -> None:
        self.resets.append((batch, reset_id, json.loads(record)))

    def release(self) -> bool:
        self.released = True
        return True


@dataclass
class FakeWatermarks:
    marks: dict[TopicPartition, Watermarks]
    times: dict[int, dict[TopicPartition, int | None]] = field(default_factory=dict)
    stop_at: tuple[threading.Event, int] | None = None
    """Set the event at the n-th look, and on (SIGTERM while the driver runs)."""
    looks: int = 0

    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]:
        self.looks += 1
        if self.stop_at is not None and self.looks >= self.stop_at[1]:
            self.stop_at[0].set()
        return dict(self.marks)

    def at_time(self, topics: Sequence[str], millis: int) -> dict[TopicPartition, int | None]:
        return dict(self.times[millis])


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
    planned = Batch(8, (OffsetRange(TP0, 70, 73),), {TP0: 73}, version=1_700_000_000_000)
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
    loop.watermarks = FakeWatermarks({TP0: Watermarks(0, 0)}, stop_at=(loop.stop, 2))
    loop.run()  # claimed, looked once for data, stopped
    assert store.committed == []
    assert store.released


@dataclass
class FakeClock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class TimedExecutor(FakeExecutor):
    """Batches take ``per_record`` seconds per record of their largest range."""

    clock: FakeClock = field(default_factory=FakeClock)
    per_record: float = 0.0

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        self.clock.now += self.per_record * max(r.count for r in batch.ranges)
        return super().execute(batch, epoch)


@dataclass
class RecordingObserver:
    lags: list[dict[TopicPartition, int]] = field(default_factory=list)
    caps: list[int] = field(default_factory=list)
    committed_ids: list[int] = field(default_factory=list)
    failures: list[bool] = field(default_factory=list)

    def resumed(self, checkpoint: Checkpoint) -> None:
        pass

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        self.lags.append({tp: m.high - positions.get(tp, m.low) for tp, m in marks.items()})

    def cap(self, records_per_partition: int) -> None:
        self.caps.append(records_per_partition)

    def skipped(self, skip: Skip) -> None:
        pass

    def committed(self, done: Committed) -> None:
        self.committed_ids.append(done.batch.batch_id)

    def failed(self, *, fenced: bool) -> None:
        self.failures.append(fenced)


def test_backpressure_plans_each_batch_with_the_cap_drawn_from_the_ones_before() -> None:
    marks = {TP0: Watermarks(0, 20_000), TP1: Watermarks(0, 20_000)}
    store, clock = FakeStore(), FakeClock()
    loop = runner(store, marks, cap=2_000)
    loop.executor = TimedExecutor(loop.stop, marks, clock=clock, per_record=0.004)
    loop.clock, loop.rate = clock, RateControl(target_seconds=1.0, max_cap=2_000)
    loop.run()
    largest = [max(r.count for r in b.ranges) for b in store.committed]
    assert largest[:2] == [2_000, 2_000]  # the maximum, and the first is the warm-up
    assert largest[2] == 250  # 1 s at 4 ms per record
    assert all(n <= 250 for n in largest[2:])
    assert store.committed[-1].positions == {TP0: 20_000, TP1: 20_000}
    assert store.planned == store.committed  # still written ahead


def test_without_backpressure_every_plan_uses_the_maximum() -> None:
    marks = {TP0: Watermarks(0, 3_000)}
    store, clock = FakeStore(), FakeClock()
    loop = runner(store, marks, cap=1_000)
    loop.executor = TimedExecutor(loop.stop, marks, clock=clock, per_record=0.004)
    loop.clock = clock
    loop.run()
    assert [b.records for b in store.committed] == [1_000, 1_000, 1_000]


def test_observer_sees_lag_shrink_to_zero_and_every_commit() -> None:
    marks = {TP0: Watermarks(0, 25), TP1: Watermarks(0, 5)}
    store, seen = FakeStore(), RecordingObserver()
    loop = runner(store, marks, cap=10)
    loop.observer = seen
    loop.run()
    assert seen.committed_ids == [1, 2, 3]
    assert seen.lags[0] == {TP0: 25, TP1: 5}
    assert seen.lags[-1] == {TP0: 0, TP1: 0}
    totals = [sum(lag.values()) for lag in seen.lags]
    assert totals == sorted(totals, reverse=True)
    assert set(seen.caps) == {10}
    assert seen.failures == []


def test_observer_counts_a_fenced_commit_as_a_conflict() -> None:
    store, seen = FakeStore(fence_at_commit=1), RecordingObserver()
    loop = runner(store, {TP0: Watermarks(0, 5)})
    loop.observer = seen
    with pytest.raises(FencedError):
        loop.run()
    assert seen.failures == [True]
    assert seen.committed_ids == []


def test_observer_counts_a_failed_batch() -> None:
    store, seen = FakeStore(), RecordingObserver()
    loop = runner(store, {TP0: Watermarks(0, 50)})
    assert isinstance(loop.executor, FakeExecutor)
    loop.executor.fail_at, loop.observer = 2, seen
    with pytest.raises(RuntimeError):
        loop.run()
    assert seen.failures == [False]
    assert seen.committed_ids == [1]


@dataclass
class HangingExecutor(FakeExecutor):
    """A batch that finishes only once the runner's deadline has fired."""

    released: threading.Event = field(default_factory=threading.Event)

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        assert self.released.wait(10), "the deadline never fired"
        return super().execute(batch, epoch)


def test_a_batch_that_outlives_its_timeout_calls_on_timeout_with_its_id() -> None:
    marks = {TP0: Watermarks(0, 5)}
    loop = runner(FakeStore(), marks)
    hanging = HangingExecutor(loop.stop, marks)
    fired: list[tuple[int, float]] = []

    def on_timeout(batch_id: int, seconds: float) -> None:
        fired.append((batch_id, seconds))
        hanging.released.set()

    loop.executor, loop.batch_timeout, loop.on_timeout = hanging, 0.05, on_timeout
    loop.run()
    assert fired == [(1, 0.05)]


def test_a_batch_within_its_timeout_never_calls_on_timeout() -> None:
    marks = {TP0: Watermarks(0, 25)}
    loop = runner(FakeStore(), marks)
    fired: list[tuple[int, float]] = []
    loop.batch_timeout, loop.on_timeout = 30.0, lambda b, s: fired.append((b, s))
    loop.run()
    assert fired == []
    assert loop.progress.positions == {TP0: 25}


@dataclass
class CountingWatermarks(FakeWatermarks):
    fetches: int = 0

    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]:
        self.fetches += 1
        return super().fetch(topics)


def test_an_idle_pipeline_with_a_zero_interval_backs_off_instead_of_polling_kafka() -> None:
    """Issue 12 item 9. Reproduction: with ``intervalSeconds: 0`` and no new data the
    loop asked Kafka for watermarks as fast as it could, thousands of times a second
    (here, against an instant fake Kafka: 100,360 times in one second)."""
    marks = {TP0: Watermarks(0, 0)}
    loop = runner(FakeStore(), marks)
    counting = CountingWatermarks(marks)
    loop.watermarks = counting
    stopper = threading.Timer(1.0, loop.stop.set)
    stopper.start()
    loop.run()
    stopper.join()
    # 50 ms, 100, 200, 400, 800, then every second: at most 6 looks in one second.
    assert 1 <= counting.fetches <= 7, counting.fetches


def test_an_idle_low_latency_pipeline_looks_for_new_data_every_tenth_of_a_second() -> None:
    """``trigger.mode: LowLatency``: new data on an idle topic waits at most 0.1 s to be
    seen, where the default mode's look backs off to once a second."""
    marks = {TP0: Watermarks(0, 0)}
    looks: dict[float, int] = {}
    for idle_max in (IDLE_MAX, IDLE_MAX_LOW_LATENCY):
        loop = runner(FakeStore(), marks)
        loop.idle_max = idle_max
        counting = CountingWatermarks(marks)
        loop.watermarks = counting
        stopper = threading.Timer(2.0, loop.stop.set)
        stopper.start()
        loop.run()
        stopper.join()
        looks[idle_max] = counting.fetches
    # Default: 50 ms, 100, 200, 400, 800, then every second: 6 looks in 2 s (and the
    # claim's), of which 8 ran here.
    assert looks[IDLE_MAX] <= 9, looks
    # Low latency: 50 ms, then every 100 ms: about 20 in 2 s, never a tight loop.
    assert 12 <= looks[IDLE_MAX_LOW_LATENCY] <= 30, looks


def test_a_planned_batch_whose_start_retention_deleted_keeps_its_id_and_its_ends() -> None:
    """Issue 12 item 4. Reproduction: a batch planned by a driver that died before its
    commit, whose first records retention then deleted, was discarded and its id
    re-planned with other end offsets: here batch 1 was planned as [0, 10) and
    committed as [4, 14), so an output keyed by batch id (the KPI example) would count
    records 10..13 in batch 1 and again in batch 2's first run."""
    planned = Batch(1, (OffsetRange(TP0, 0, 10),), {TP0: 10})
    store = FakeStore(checkpoint=Checkpoint(0, {TP0: 0}, 1, None, "", False, planned))
    marks = {TP0: Watermarks(4, 30)}
    loop = runner(store, marks)
    loop.policy = dataclasses.replace(loop.policy, on_out_of_range=OnOffsetOutOfRange.EARLIEST)
    skipped: list[Skip] = []
    watching = RecordingObserver()
    watching.skipped = skipped.append  # type: ignore[method-assign]
    loop.observer = watching
    loop.run()

    first = store.committed[0]
    assert (first.batch_id, first.ranges, first.positions) == (
        1,
        (OffsetRange(TP0, 4, 10),),
        {TP0: 10},
    )
    assert first.lost == (Skip(TP0, 0, 4),)
    assert skipped == [Skip(TP0, 0, 4)]
    assert [b.ranges[0].start for b in store.committed[1:]] == [10, 20]
    assert loop.progress.skipped == 4


def test_with_on_offset_out_of_range_fail_the_driver_stops_naming_the_partition() -> None:
    planned = Batch(1, (OffsetRange(TP0, 0, 10),), {TP0: 10})
    store = FakeStore(checkpoint=Checkpoint(0, {TP0: 0}, 1, None, "", False, planned))
    loop = runner(store, {TP0: Watermarks(4, 30)})
    with pytest.raises(OffsetOutOfRangeError, match="t/0: committed offset 0"):
        loop.run()
    assert store.committed == []


def test_batch_versions_follow_the_wall_clock_and_only_grow() -> None:
    """Write versions (write_order) are the plan's millisecond, raised past the last
    committed batch's version: after a checkpoint reset they start at the clock, not
    at 1, and a clock behind the previous driver's still gives greater versions."""
    marks = {TP0: Watermarks(0, 30)}
    stored = 1_900_000_000_000  # a previous driver's clock was ahead of ours
    store = FakeStore(Checkpoint(0, {}, 1, None, "", False, version=stored))
    loop = runner(store, marks, cap=10)
    loop.wall = lambda: 1_800_000_000.5
    loop.run()
    assert [b.version for b in store.committed] == [stored + 1, stored + 2, stored + 3]
    assert store.planned == store.committed, "the version is written ahead with the ranges"

    fresh = FakeStore()  # no checkpoint: a reset, or a new pipeline on an old table
    loop = runner(fresh, marks, cap=10)
    clock = iter([1_800_000_000.5, 1_800_000_000.5, 1_800_000_002.25])
    loop.wall = lambda: next(clock)
    loop.run()
    assert [b.version for b in fresh.committed] == [
        1_800_000_000_500,
        1_800_000_000_501,
        1_800_000_002_250,
    ]


def test_a_recovered_batch_keeps_its_version_and_one_planned_before_versions_gets_one() -> None:
    marks = {TP0: Watermarks(0, 20)}
    planned = Batch(1, (OffsetRange(TP0, 0, 10),), {TP0: 10}, version=1_700_000_000_000)
    store = FakeStore(Checkpoint(0, {}, 1, None, "", False, planned=planned))
    loop = runner(store, marks, cap=10)
    loop.wall = lambda: 1_800_000_000.0
    loop.run()
    assert [b.version for b in store.committed] == [1_700_000_000_000, 1_800_000_000_000]

    legacy = dataclasses.replace(planned, version=0)
    store = FakeStore(Checkpoint(0, {}, 1, None, "", False, planned=legacy, version=5))
    loop = runner(store, marks, cap=10)
    loop.wall = lambda: 1_800_000_000.0
    loop.run()
    assert [b.version for b in store.committed] == [1_800_000_000_000, 1_800_000_000_001]
    assert store.committed[0].ranges == legacy.ranges


def test_an_offset_reset_to_a_timestamp_moves_the_positions_once_under_the_claim() -> None:
    """Issue 15 item 3: a replay from a time is a batch of its own (no ranges, the new
    positions, a newer write version), recorded with who and why; a batch planned by
    the previous driver is dropped, and reading goes on from the new positions."""
    marks = {TP0: Watermarks(0, 40), TP1: Watermarks(5, 20)}
    planned = Batch(8, (OffsetRange(TP0, 30, 35),), {TP0: 35, TP1: 20}, version=1_000)
    store = FakeStore(Checkpoint(7, {TP0: 30, TP1: 20}, 1, None, "v1", False, planned, 999))
    loop = runner(store, marks, cap=100)
    request = OffsetReset.model_validate(
        {
            "id": "replay-1",
            "to": "Timestamp",
            "timestamp": "2026-11-24T10:00:00Z",
            "reason": "bad deploy",
            "requestedBy": "alice",
        }
    )
    assert isinstance(loop.watermarks, FakeWatermarks)
    loop.watermarks.times[request.epoch_millis()] = {TP0: 12, TP1: None}
    loop.offset_reset = request
    loop.run()
    [(moved, reset_id, record)] = store.resets
    assert (moved.batch_id, moved.ranges, moved.positions) == (8, (), {TP0: 12, TP1: 20})
    assert moved.version > 999
    assert reset_id == "replay-1"
    assert record["requestedBy"] == "alice"
    assert record["reason"] == "bad deploy"
    assert record["from"] == {"t": {"0": 30, "1": 20}}
    assert record["positions"] == {"t": {"0": 12, "1": 20}}
    assert planned not in store.committed
    assert store.committed[0].batch_id == 9
    assert store.committed[0].ranges == (OffsetRange(TP0, 12, 40),)
    assert store.committed[0].version > moved.version


def test_an_offset_reset_already_applied_is_not_applied_again() -> None:
    marks = {TP0: Watermarks(0, 10)}
    checkpoint = Checkpoint(3, {TP0: 10}, 1, None, "v1", False, resets=frozenset({"r1"}))
    store = FakeStore(checkpoint)
    loop = runner(store, marks)
    loop.offset_reset = OffsetReset.model_validate({"id": "r1", "to": "Earliest"})
    loop.watermarks = FakeWatermarks(marks, stop_at=(loop.stop, 2))  # at the first plan
    loop.run()
    assert store.resets == []
    assert loop.progress.positions == {TP0: 10}
