"""A stop (SIGTERM) finishes the batch in flight and nothing else; with none in
flight it ends a wait for a dependency at once and no batch begins after it
(issue 43, item 1).

Reproduction (before the fix): a runner retrying its plan through a Kafka outage,
or its claim through a Cassandra outage, went on retrying after ``stop`` was set;
``test_a_stop_ends_the_wait_for_kafka_without_planning`` hung there (its pause fake
counts the retries and fails after 50 of them)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import pytest
from cassandra.cluster import NoHostAvailable

from sluice_job import stopping
from sluice_job.checkpoint import Batch, Checkpoint
from sluice_job.offsets import OffsetRange, TopicPartition, Watermarks
from sluice_job.outages import Backoff, best_effort, through_outages
from sluice_job.stopping import BatchGate, StopRequestedError
from sluice_job.watermarks import KafkaUnavailableError
from tests.unit.test_outages import Watched
from tests.unit.test_runner import TP0, FakeStore, FakeWatermarks, runner

pytestmark = pytest.mark.unit


def test_a_stop_with_no_batch_in_flight_lets_none_begin() -> None:
    gate = BatchGate()
    assert gate.close() is None
    assert gate.stopping_now
    assert not gate.begin(1)
    assert gate.in_flight is None
    assert stopping.announcement(None) == stopping.NOW


def test_a_stop_during_a_batch_lets_that_batch_finish_and_no_other() -> None:
    gate = BatchGate()
    assert gate.begin(7)
    assert gate.close() == 7
    assert not gate.stopping_now
    assert stopping.announcement(7) == stopping.FINISH
    gate.end()
    assert not gate.begin(8)


def test_a_stop_between_marking_a_batch_and_checking_the_gate_keeps_its_word() -> None:
    """The handler may run between ``begin``'s two lines: it saw the batch marked and
    said it finishes it, so ``begin`` lets it run."""

    class Interrupted(BatchGate):
        said: int | None = None

        def __setattr__(self, name: str, value: object) -> None:
            super().__setattr__(name, value)
            if name == "in_flight" and value is not None and self.said is None:
                self.said = self.close()  # the signal arrives right after the mark

    gate = Interrupted()
    assert gate.begin(3)
    assert gate.said == 3


def test_timeout_message_says_whether_a_batch_was_in_flight() -> None:
    assert "batch in flight did not finish within 60s" in stopping.timeout_message(4, 60)
    assert "no batch in flight" in stopping.timeout_message(None, 60)


def test_a_stop_ends_a_wait_for_a_dependency_after_the_current_attempt() -> None:
    stop, calls = threading.Event(), []

    def connect() -> None:
        calls.append(1)
        if len(calls) == 3:
            stop.set()  # SIGTERM while Cassandra is away
        raise NoHostAvailable("down", {})

    with pytest.raises(StopRequestedError, match="connect"):
        through_outages("connect", connect, Watched(), pause=lambda _s: None, stop=stop)
    assert len(calls) == 3


def test_with_no_stop_given_a_wait_ignores_it_as_a_batch_in_flight_does() -> None:
    calls: list[int] = []

    def commit() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise NoHostAvailable("down", {})
        return "done"

    assert through_outages("batch 4", commit, Watched(), pause=lambda _s: None) == "done"


def test_the_default_pause_waits_on_the_stop_and_is_cut_short_by_it() -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()

    def down() -> None:
        raise NoHostAvailable("down", {})

    with pytest.raises(StopRequestedError):
        through_outages("claim", down, Watched(), backoff=Backoff(30.0, 30.0), stop=stop)


def test_best_effort_leaves_a_step_undone_through_an_outage() -> None:
    def release() -> None:
        raise NoHostAvailable("down", {})

    watched = Watched()
    assert not best_effort("release", release, watched)
    assert watched.seen == [("cassandra", False)]
    assert best_effort("release", lambda: None, watched)


@dataclass
class KafkaAway(FakeWatermarks):
    """Kafka answers the claim's look, then goes away; ``stop`` is set at the third
    failed look (SIGTERM during the outage)."""

    stop: threading.Event = field(default_factory=threading.Event)
    looks: int = 0

    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]:
        self.looks += 1
        if self.looks == 1:
            return dict(self.marks)
        if self.looks == 4:
            self.stop.set()
        raise KafkaUnavailableError("kafka down")


def test_a_stop_ends_the_wait_for_kafka_without_planning() -> None:
    store = FakeStore()
    loop = runner(store, {TP0: Watermarks(0, 50)})
    loop.watermarks = KafkaAway({TP0: Watermarks(0, 50)}, stop=loop.stop)
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        assert len(pauses) < 50, "the runner never looked at the stop"

    loop.pause = pause
    loop.run()
    assert store.planned == []
    assert store.committed == []
    assert store.released


def test_a_planned_batch_is_not_recovered_after_a_stop() -> None:
    planned = Batch(5, (OffsetRange(TP0, 0, 10),), {TP0: 10}, 1)
    loop = runner(FakeStore(), {TP0: Watermarks(0, 50)})

    @dataclass
    class StopAfterClaim(FakeStore):
        def claim(self, epoch: int) -> Checkpoint:
            loop.progress.gate.close()  # SIGTERM after the claim, before the recovery
            loop.stop.set()
            return super().claim(epoch)

    store = StopAfterClaim(Checkpoint(4, {TP0: 0}, 1, None, "", False, planned=planned))
    loop.store = store
    loop.run()
    assert store.committed == []
    assert store.released


def test_a_stop_before_the_claim_claims_nothing() -> None:
    claimed: list[int] = []

    class Store(FakeStore):
        def claim(self, epoch: int) -> Checkpoint:
            claimed.append(epoch)
            return super().claim(epoch)

    store = Store()
    loop = runner(store, {TP0: Watermarks(0, 50)})
    loop.stop.set()
    with pytest.raises(StopRequestedError, match="claim"):
        loop.run()
    assert claimed == []
    assert not store.released


@dataclass
class FakeSparkContext:
    cancelled: int = 0

    def cancelAllJobs(self) -> None:  # noqa: N802 (Spark's name)
        self.cancelled += 1


@dataclass
class FakeSpark:
    sparkContext: FakeSparkContext = field(default_factory=FakeSparkContext)  # noqa: N815


@pytest.mark.parametrize(("in_flight", "cancelled"), [(None, 1), (3, 0)])
def test_a_stop_cancels_spark_jobs_only_with_no_batch_in_flight(
    in_flight: int | None, cancelled: int
) -> None:
    """With none in flight only a standby's check or warm-up runs Spark jobs: they
    are cancelled, so a warm-up waiting on Kafka does not hold the stop up."""
    from pyspark.sql import SparkSession

    from sluice_job import driver

    spark, stop, gate = FakeSpark(), threading.Event(), BatchGate()
    if in_flight is not None:
        assert gate.begin(in_flight)
    watcher = driver._cancel_jobs_on_stop(cast(SparkSession, spark), stop, gate)
    gate.close()
    stop.set()
    watcher.join(5)
    assert not watcher.is_alive()
    assert spark.sparkContext.cancelled == cancelled
