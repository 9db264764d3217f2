"""Lag is measured against the source's end offsets from the driver's start, committed
or not (issue 39, item 8): the records between where the driver reads from (its
committed offsets, or the configured starting offsets when nothing is committed) and
the end of each partition, whatever batch is in flight and for however long."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice_api.source import OnOffsetOutOfRange, StartingOffsets
from sluice_job.checkpoint import Batch, Checkpoint
from sluice_job.offsets import OffsetRange, Positions, TopicPartition, Watermarks
from sluice_job.planner import Policy, plan, starts
from sluice_job.ports import NoObserver, PhaseTimes
from sluice_job.runner import Runner

pytestmark = pytest.mark.unit
TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
EARLIEST = Policy(StartingOffsets.EARLIEST, OnOffsetOutOfRange.EARLIEST, 1_000)
LATEST = Policy(StartingOffsets.LATEST, OnOffsetOutOfRange.EARLIEST, 1_000)


# -- where lag counts from (pure) ---------------------------------------------------


def test_with_nothing_committed_lag_counts_from_the_configured_starting_offsets() -> None:
    marks = {TP0: Watermarks(100, 61_100), TP1: Watermarks(0, 2_084)}
    assert starts({}, marks, EARLIEST) == {TP0: 100, TP1: 0}
    assert starts({}, marks, LATEST) == {TP0: 61_100, TP1: 2_084}


def test_with_a_checkpoint_lag_counts_from_the_committed_offsets() -> None:
    marks = {TP0: Watermarks(0, 500), TP1: Watermarks(0, 40)}
    # TP1 is new to a pipeline that has a checkpoint: it is read from its earliest
    assert starts({TP0: 320}, marks, LATEST) == {TP0: 320, TP1: 0}


def test_a_checkpoint_outside_the_partition_counts_from_where_reading_resumes() -> None:
    marks = {TP0: Watermarks(50, 80)}
    assert starts({TP0: 10}, marks, EARLIEST) == {TP0: 50}  # retention deleted 10..49
    assert starts({TP0: 900}, marks, EARLIEST) == {TP0: 50}  # the topic was recreated


@given(
    committed=st.one_of(st.none(), st.integers(0, 2_000)),
    low=st.integers(0, 1_000),
    size=st.integers(0, 1_000),
    latest=st.booleans(),
)
def test_the_start_is_where_the_next_plan_reads_from(
    committed: int | None, low: int, size: int, latest: bool
) -> None:
    marks = {TP0: Watermarks(low, low + size)}
    positions = {} if committed is None else {TP0: committed}
    policy = LATEST if latest else EARLIEST
    planned = plan(positions, marks, policy)
    start = planned.ranges[0].start if planned.ranges else planned.positions[TP0]
    assert starts(positions, marks, policy) == {TP0: start}


# -- what the driver reports, with fakes of its ports --------------------------------


@dataclass
class Store:
    checkpoint: Checkpoint
    committed: list[Batch] = field(default_factory=list)

    def claim(self, epoch: int) -> Checkpoint:
        return self.checkpoint

    def plan(self, batch: Batch) -> None:
        pass

    def commit(self, batch: Batch, started_at: datetime) -> float:
        self.committed.append(batch)
        return 0.001

    def reset(self, batch: Batch, reset_id: str, record: str) -> None:
        pass

    def release(self) -> bool:
        return True


@dataclass
class Kafka:
    """End offsets that producers move on while the driver works."""

    marks: dict[TopicPartition, Watermarks]
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]:
        with self.lock:
            return dict(self.marks)

    def produce(self, tp: TopicPartition, count: int) -> None:
        with self.lock:
            mark = self.marks[tp]
            self.marks[tp] = Watermarks(mark.low, mark.high + count)

    def at_time(self, topics: Sequence[str], millis: int) -> dict[TopicPartition, int | None]:
        raise AssertionError("no reset here")


@dataclass
class Lags(NoObserver):
    """The observer: the lag it was last told, per partition."""

    seen: list[int] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        with self.changed:
            self.seen.append(sum(m.high - positions[tp] for tp, m in marks.items()))
            self.changed.notify_all()

    def wait_for(self, total: int, timeout: float = 5.0) -> bool:
        with self.changed:
            return self.changed.wait_for(
                lambda: bool(self.seen) and self.seen[-1] == total, timeout
            )


@dataclass
class StopAtLag(Lags):
    """Stops the driver once it reported a lag (SIGTERM then)."""

    stop: threading.Event = field(default_factory=threading.Event)

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        super().lag(marks, positions)
        self.stop.set()


@dataclass
class Stuck:
    """The first batch runs until ``release`` is set, as a first batch whose sink
    waits out an outage, or whose Spark takes minutes to start; the driver stops after
    one batch."""

    stop: threading.Event
    release: threading.Event = field(default_factory=threading.Event)
    lags_at_start: list[int] = field(default_factory=list)
    observer: Lags | None = None

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        if self.observer is not None:
            self.lags_at_start.append(self.observer.seen[-1] if self.observer.seen else -1)
        assert self.release.wait(10), "the test never released the batch"
        self.stop.set()
        return PhaseTimes(0.0, 0.0, 0.0, batch.records)


def driver(
    checkpoint: Checkpoint, kafka: Kafka, policy: Policy = EARLIEST
) -> tuple[Runner, Lags, Stuck, Store]:
    stop, lags = threading.Event(), Lags()
    executor, store = Stuck(stop, observer=lags), Store(checkpoint)
    loop = Runner(
        epoch=3,
        topics=["orders"],
        policy=policy,
        interval=0.0,
        store=store,
        watermarks=kafka,
        executor=executor,
        stop=stop,
        observer=lags,
        lag_watermarks=kafka,
        lag_every=0.01,
    )
    return loop, lags, executor, store


def in_background(loop: Runner) -> threading.Thread:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return thread


def test_a_driver_recovering_a_planned_batch_reports_the_whole_backlog_before_it() -> None:
    """The issue's case: drivers that re-ran the same planned batch and failed it, one
    after another, never reported lag; the column kept 627 while 61,000 waited."""
    planned = Batch(1, (OffsetRange(TP0, 0, 627),), {TP0: 627}, version=1)
    checkpoint = Checkpoint(0, {}, 2, None, "v1", False, planned=planned)
    kafka = Kafka({TP0: Watermarks(0, 61_000)})
    loop, lags, executor, _ = driver(checkpoint, kafka)
    thread = in_background(loop)
    assert lags.wait_for(61_000)
    executor.release.set()
    thread.join(10)
    assert executor.lags_at_start == [61_000]


def test_while_the_first_batch_runs_lag_follows_the_end_offsets() -> None:
    kafka = Kafka({TP0: Watermarks(0, 627), TP1: Watermarks(0, 2_084)})
    loop, lags, executor, store = driver(Checkpoint(0, {}, 0, None, "", False), kafka)
    thread = in_background(loop)
    assert lags.wait_for(627 + 2_084)
    kafka.produce(TP0, 30_000)
    kafka.produce(TP1, 28_289)
    assert lags.wait_for(61_000), f"lag stayed at {lags.seen[-1]}"
    executor.release.set()
    thread.join(10)
    assert not thread.is_alive()
    assert [b.batch_id for b in store.committed] == [1]


def test_a_pipeline_starting_at_latest_reports_no_lag_for_what_it_will_not_read() -> None:
    kafka = Kafka({TP0: Watermarks(0, 5_000)})
    loop, _lags, _executor, _ = driver(Checkpoint(0, {}, 0, None, "", False), kafka, LATEST)
    lags = loop.observer = StopAtLag(stop=loop.stop)  # claim, report, release
    loop.run()
    assert lags.seen
    assert lags.seen[0] == 0


def test_the_prometheus_lag_of_a_driver_that_has_not_committed_is_the_backlog() -> None:
    import uuid

    from prometheus_client import generate_latest

    from sluice_job.metrics import PrometheusObserver
    from sluice_operator.progress import parse

    pipeline = f"ns-{uuid.uuid4().hex[:6]}/orders"
    observer = PrometheusObserver(pipeline)
    observer.started("job:v1", epoch=4)
    marks = {TP0: Watermarks(0, 61_000)}
    observer.lag(marks, starts({}, marks, EARLIEST))
    report = parse(generate_latest().decode(), pipeline)
    assert report is not None
    assert report.lag == 61_000
    assert report.batch_id is None  # nothing committed: no batch, whatever the lag
