"""Dead letters written once per batch (issue 43, item 4): the decision to skip a
re-run's letters, the executor's order (write, then record, then skip on a re-run),
and the checkpoint row's marker as a recovered batch reads it. The same executor
writes letters to Kafka and to Pub/Sub, so this holds for both destinations; the end
to end test is tests/integration/test_driver_dead_letters_recovery.py."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
from cassandra.cluster import NoHostAvailable
from pyspark.sql import DataFrame, Row

from sluice_job import checkpoint_cql, execute, transform
from sluice_job.checkpoint import Batch, CheckpointStore, FencedError
from sluice_job.deadletter import DeadLetterUnavailableError, Reject
from sluice_job.execute import Gathered, KafkaRecords, SparkExecutor, letters_written
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_job.transform import TransformResult

pytestmark = pytest.mark.unit

TP = TopicPartition("events", 0)
BATCH = Batch(5, (OffsetRange(TP, 100, 200),), {TP: 200}, version=7)


def test_a_batch_recovered_with_the_marker_or_already_recorded_here_skips_its_letters() -> None:
    assert not letters_written(BATCH, None)  # a first run writes them
    assert letters_written(dataclasses.replace(BATCH, letters_durable=True), None)
    assert letters_written(BATCH, 5)  # this driver's next attempt of the same batch
    # The next plan never inherits the marker of the batch before it.
    assert not letters_written(dataclasses.replace(BATCH, batch_id=6), 5)


def test_the_marker_does_not_change_what_a_batch_is() -> None:
    # The plan's landed check and the commit's "already committed" check compare
    # batches: a recovered batch with the marker is still the planned batch.
    assert dataclasses.replace(BATCH, letters_durable=True) == BATCH


@dataclass
class FakeLetters:
    """A dead-letter destination: counts what it was asked to write; ``fail`` raises."""

    refuses: bool = False
    payload_budget: int = 1000
    fail: bool = False
    written: list[tuple[int, int]] = field(default_factory=list)

    def write(self, rejects: Iterable[Reject], *, batch_id: int, count: int) -> None:
        letters = list(rejects)
        if self.fail:
            raise DeadLetterUnavailableError("brokers did not confirm")
        self.written.append((batch_id, len(letters)))


@dataclass
class FakeMarks:
    marked: list[int] = field(default_factory=list)
    held_by: int | None = None
    """A newer epoch holding the pipeline: ``still_held`` raises."""
    away: int = 0
    """Records that fail first (Cassandra away), one each."""

    def letters_durable(self, batch: Batch) -> None:
        if self.away:
            self.away -= 1
            raise NoHostAvailable("Unable to connect to any servers", {})
        self.marked.append(batch.batch_id)

    def still_held(self, batch: Batch) -> None:
        if self.held_by is not None:
            raise FencedError(f"batch {batch.batch_id}: held by {self.held_by}", self.held_by)


@dataclass
class FakeRejects:
    rows: list[Row]
    during_collect: list[Any] = field(default_factory=list)
    """Called while the rows are collected (a Spark job): a claim landing then."""

    def collect(self) -> list[Row]:
        for happen in self.during_collect:
            happen()
        return self.rows


def _rejects(n: int) -> DataFrame:
    rows = [
        Row(
            key=b"k",
            value=b"{",
            topic="events",
            partition=0,
            offset=100 + i,
            reason="malformed JSON",
            key_size=1,
            value_size=1,
        )
        for i in range(n)
    ]
    return cast(DataFrame, FakeRejects(rows))


def _executor(letters: FakeLetters, marks: FakeMarks) -> SparkExecutor:
    records = KafkaRecords(cast(Any, None), {})
    return SparkExecutor(records, cast(Any, None), {}, cast(Any, None), letters, marks)


def test_letters_are_recorded_once_durable_and_a_second_attempt_does_not_write_them() -> None:
    letters, marks = FakeLetters(), FakeMarks()
    executor = _executor(letters, marks)
    executor._dead_letter(_rejects(3), Gathered(3, 6), BATCH)
    executor._dead_letter(_rejects(3), Gathered(3, 6), BATCH)
    assert letters.written == [(5, 3)]
    assert marks.marked == [5]


def test_a_recovered_batch_whose_letters_are_durable_writes_and_records_nothing() -> None:
    letters, marks = FakeLetters(), FakeMarks()
    recovered = dataclasses.replace(BATCH, letters_durable=True)
    _executor(letters, marks)._dead_letter(_rejects(3), Gathered(3, 6), recovered)
    assert (letters.written, marks.marked) == ([], [])


def test_letters_not_confirmed_are_not_recorded_so_the_next_attempt_writes_them() -> None:
    letters, marks = FakeLetters(fail=True), FakeMarks()
    executor = _executor(letters, marks)
    with pytest.raises(DeadLetterUnavailableError):
        executor._dead_letter(_rejects(2), Gathered(2, 4), BATCH)
    assert marks.marked == []
    letters.fail = False
    executor._dead_letter(_rejects(2), Gathered(2, 4), BATCH)
    assert (letters.written, marks.marked) == ([(5, 2)], [5])


@dataclass
class FakeSession:
    """Answers the checkpoint row's load with ``row``."""

    row: Any

    def execute(self, statement: Any, params: Any = None) -> Any:
        return self

    def one(self) -> Any:
        return self.row


def _row(letters_durable: int | None) -> Any:
    """The checkpoint row of a pipeline that committed batch 4 and planned batch 5."""
    return SimpleNamespace(
        format=1,
        epoch=3,
        owner=uuid.uuid4(),
        batch_id=4,
        offsets='{"events": {"0": 100}}',
        code_version="v",
        released=False,
        planned_id=5,
        planned=BATCH.to_json(),
        write_version=6,
        applied_resets=None,
        letters_durable=letters_durable,
        event_watermark=None,
    )


@pytest.mark.parametrize(("marker", "durable"), [(5, True), (4, False), (None, False)])
def test_a_planned_batch_is_read_with_its_letters_durable_only_if_the_marker_names_it(
    marker: int | None, durable: bool
) -> None:
    store = CheckpointStore(cast(Any, FakeSession(_row(marker))), "ks", "c/ns/p", "v")
    store._statements["load"] = cast(Any, "load")
    planned = store.load().planned
    assert planned == BATCH
    assert planned is not None
    assert planned.letters_durable is durable


def test_the_marker_is_written_fenced_like_the_plan_and_only_for_the_planned_batch() -> None:
    cql = " ".join(checkpoint_cql.statements("ks")["letters"].split())
    assert cql == (
        "UPDATE ks.checkpoints SET letters_durable = ? WHERE pipeline = ? "
        "IF owner = ? AND epoch = ? AND batch_id = ? AND planned_id = ?"
    )


def test_a_driver_fenced_while_its_batch_ran_sends_none_of_its_letters() -> None:
    """A chaos soak with a hot standby repeated 23 of 4,241 letters: a force-deleted
    driver's batch ran on for 3 s after the standby claimed, sent its letters, and
    was fenced only at its commit, while its successor re-ran the batch with them."""
    letters, marks = FakeLetters(), FakeMarks(held_by=6)
    with pytest.raises(FencedError):
        _executor(letters, marks)._dead_letter(_rejects(3), Gathered(3, 6), BATCH)
    assert (letters.written, marks.marked) == ([], [])


def test_a_driver_fenced_while_its_rejects_were_collected_sends_none_of_its_letters() -> None:
    """The idle make soak of 2 December with a hot standby repeated 17 letters, all of
    one batch. A window that fits: the fence was read before the rejects were
    collected, and collecting them is a Spark job (Kafka read again, transform again),
    long enough for a successor's claim. The fence is now read after the collect,
    just before the flush."""
    letters, marks = FakeLetters(), FakeMarks()
    rejects = _rejects(3)

    def claimed() -> None:
        marks.held_by = 6

    cast(FakeRejects, rejects).during_collect.append(claimed)
    with pytest.raises(FencedError):
        _executor(letters, marks)._dead_letter(rejects, Gathered(3, 6), BATCH)
    assert (letters.written, marks.marked) == ([], [])


def test_letters_sent_whose_record_failed_are_recorded_on_the_next_attempt_not_sent_again() -> None:
    """The soak's Cassandra stop repeated 17 of 22,632 letters, all of one batch: the
    letters were acknowledged, the record of them failed (Cassandra stopped), and the
    batch's attempt after the outage sent them again before recording them."""
    letters, marks = FakeLetters(), FakeMarks(away=1)
    executor = _executor(letters, marks)
    with pytest.raises(NoHostAvailable):
        executor._dead_letter(_rejects(3), Gathered(3, 6), BATCH)
    executor._dead_letter(_rejects(3), Gathered(3, 6), BATCH)  # after the outage
    assert letters.written == [(5, 3)], "sent once"
    assert marks.marked == [5], "recorded on the second attempt"


@dataclass
class WaitingSink:
    """A sink whose write lasts until the rejects were collected (or a deadline):
    whether the collect ran beside it."""

    collected: threading.Event
    patience: float = 10.0
    saw_collect: list[bool] = field(default_factory=list)

    def write(self, frame: DataFrame, version: int, *, dry: bool = False) -> int | None:
        self.saw_collect.append(self.collected.wait(timeout=self.patience))
        return 3


@dataclass(frozen=True)
class FixedRecords:
    def frame(self, batch: Batch) -> DataFrame:
        return cast(DataFrame, object())

    def describe(self, reject: Reject) -> Reject:
        return reject


def test_the_rejects_are_collected_beside_the_write_not_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43, item 6: in the soak with a hot standby, a promoted standby's recovered
    batch took 2.5-3.4 s (load 6), and its dead-letter phase 0.65 s of that: the
    rejects were collected (a Spark job: Kafka read, transform) only after the sink's
    write. They are collected beside it now, right after they are counted, so the
    letters wait only for their flush. On the old code the write saw no collect."""
    collected = threading.Event()
    rejects = _rejects(3)
    cast(FakeRejects, rejects).during_collect.append(collected.set)
    output = cast(DataFrame, object())
    monkeypatch.setattr(
        transform, "apply", lambda fn, records, opts, states: TransformResult(output, rejects)
    )
    monkeypatch.setattr(execute, "cut", lambda frame, budget: frame)
    monkeypatch.setattr(execute, "measure", lambda frame: (3, 6))
    letters, marks, sink = FakeLetters(), FakeMarks(), WaitingSink(collected)
    executor = SparkExecutor(FixedRecords(), cast(Any, None), {}, sink, letters, marks)
    times = executor.execute(BATCH, epoch=2)
    assert sink.saw_collect == [True], "the rejects collected while the write ran"
    assert (times.records_rejected, letters.written, marks.marked) == (3, [(5, 3)], [5])
    collected.clear()
    sink.patience = 0.0
    recovered = dataclasses.replace(BATCH, letters_durable=True)
    executor.execute(recovered, epoch=3)
    assert letters.written == [(5, 3)], "letters durable: not sent again"
    assert not collected.is_set(), "nor collected again"
