"""Executing one planned batch on Spark: read the exact ranges, transform, write.

One pass over the data in the common case. Nothing is persisted: the sink write is
the Spark job that reads Kafka, runs the transform and writes, and it counts the rows
it wrote. When the transform returns rejects, a second, small job counts them
*concurrently* with the write (Spark runs jobs from two threads at once) and, only
if there are any and they fit, a third brings them to the driver for the dead-letter
writer, still beside the write (:func:`gather`).
Without a dead-letter topic any reject fails the batch, so then the rejects are
counted first and the sink is not written at all.

Why not cache the records and count them, as before: at a steady 5k events/s with a
1 s trigger, each batch paid ~1.2 s for two extra sequential jobs (count the cached
records, count the rejects) on top of the write. A batch's fixed cost grows the next
batch, so that cost decided the end-to-end latency (docs/tuning.md). Reading Kafka
twice when a transform returns rejects is cheaper than waiting for the jobs in turn.

A stateful transform's new states (``TransformResult.state``) are written by one job
per state, also beside the sink's write (``state.write``), and the batch commits only
when all of them and the sink are written.

Phases, as the metrics report them: ``read`` builds the Kafka read (planning only;
the fetch itself happens inside the jobs), ``transform`` is the user's function
building its frames, ``write`` is the sink job (fetch, transform, write), and
``dead_letter`` waits for the rejects and sends them. Records in are counted from
the planned offset ranges. Rejects go to the dead-letter topic before the runner
commits: a commit never covers a reject that is not durable.

Rejects are written once per batch: once they are durable, the checkpoint row says so
(``CheckpointStore.letters_durable``, fenced like the plan), and a re-run of the batch
(a driver recovering it after a crash, or this driver's next attempt) skips them
(:func:`letters_written`). Before sending them the driver reads the checkpoint row
(``CheckpointStore.still_held``): a driver fenced while its batch ran sends none;
and a batch whose record failed after its letters were sent (Cassandra away) is
attempted again by the same driver without sending them again. The read follows the
collect of the rejects (a Spark job), so only the flush comes after it. A letter
repeats only if the driver dies between the flush and that record, or is fenced
between that read and the flush (docs/dead-letters.md); for rejects too many to
collect at once, the flush includes fetching them.

Rejects reach the driver bounded: Spark cuts each key and value to what one letter
carries (the dead-letter topic's limit, ``deadletter.fit``), and the counting job
also sums their bytes, so many or large rejects come partition by partition rather
than in one piece.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from sluice_api.event_time import advance
from sluice_job import event_time, failpoints, logs, one_task, reader, transform
from sluice_job.checkpoint_rows import Batch
from sluice_job.deadletter import DeadLetters, Reject
from sluice_job.ports import PhaseTimes
from sluice_job.state import States
from sluice_job.state import tally as state_tally
from sluice_job.state import write as state_write
from sluice_job.state.handle import Kept
from sluice_job.transform import TransformFn
from sluice_job.write_order import write_version

COLLECT_LIMIT: Final = 50_000
"""Rejects of a batch up to this many reach the driver in one piece; more come
partition by partition, so a batch of only rejects cannot exhaust its memory."""
COLLECT_BYTES: Final = 64 * 1024 * 1024
"""Likewise for the rejects' keys and values together, after the cut."""


class Sink(Protocol):
    def write(self, frame: DataFrame, version: int, *, dry: bool = False) -> int | None:
        """Write ``frame`` idempotently; returns the rows written, if it counts them.
        ``dry``: run the same Spark job and prepare every row's write, but write
        nothing (a standby's warm-up, ``standby.warm_read``); returns the rows that
        would have been written, if it counts them."""


class Records(Protocol):
    """Where a batch's records come from: Kafka's exact ranges (:class:`KafkaRecords`)
    or the messages a Pub/Sub batch holds (``pubsub.records``)."""

    def frame(self, batch: Batch) -> DataFrame:
        """The batch's records with the Kafka source's columns, ``batch_id`` and the
        source position (``keys.POSITION``)."""
        ...

    def describe(self, reject: Reject) -> Reject:
        """``reject`` with what the dead letter should say of its source record."""
        ...


class LetterMarks(Protocol):
    def letters_durable(self, batch: Batch) -> None:
        """Record that the dead letters of planned ``batch`` are durable
        (``CheckpointStore.letters_durable``), or raise."""

    def still_held(self, batch: Batch) -> None:
        """Raise ``FencedError`` if a newer driver holds the pipeline now
        (``CheckpointStore.still_held``)."""


def letters_written(batch: Batch, marked: int | None) -> bool:
    """Whether the dead letters of ``batch`` are already durable (a pure function):
    its checkpoint row said so when it was recovered, or this executor recorded it
    (``marked``: the last batch id it did) in an earlier attempt."""
    return batch.letters_durable or marked == batch.batch_id


@dataclass(frozen=True)
class KafkaRecords:
    spark: SparkSession
    client_config: Mapping[str, str]

    def frame(self, batch: Batch) -> DataFrame:
        return reader.read(self.spark, self.client_config, batch.ranges, batch.batch_id)

    def describe(self, reject: Reject) -> Reject:
        return reject


@dataclass
class Stopwatch:
    last: float = field(default_factory=time.perf_counter)

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self.last = now - self.last, now
        return elapsed


@dataclass
class SparkExecutor:
    records: Records
    transform: TransformFn
    options: Mapping[str, Any]
    sink: Sink
    dead_letters: DeadLetters
    marks: LetterMarks
    states: States | None = None
    """The declared states and event time (``spec.transform.state``, ``eventTime``), or
    ``None``: a transform that declares neither."""
    watermark: Callable[[], int | None] = lambda: None
    """The event-time watermark the last commit left (``CheckpointStore.event_watermark``)."""
    one_task_records: int | None = None
    """``trigger.mode: LowLatency``: a batch of at most this many records runs in one
    Spark task (``one_task``); ``None``: the default mode."""
    _checked: bool = field(init=False, default=False)
    """Whether a one-task batch's output plan has been checked for a shuffle."""
    _marked: int | None = field(init=False, default=None)
    """The last batch whose letters this executor made durable and recorded so."""
    _sent: int | None = field(init=False, default=None)
    """The last batch whose letters this executor sent and Kafka acknowledged, recorded
    or not: an attempt again after the record failed (Cassandra away) only records."""
    _counter: ThreadPoolExecutor = field(
        init=False, default_factory=lambda: ThreadPoolExecutor(1, "sluice-rejects")
    )
    _state_writer: ThreadPoolExecutor = field(
        init=False, default_factory=lambda: ThreadPoolExecutor(2, "sluice-state")
    )
    _tally: state_tally.Tally | None = field(init=False, default=None)
    """The states' requests of every batch so far, added by the tasks (``state.tally``)."""

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        kept = Kept()  # the batch's lookups, one evaluation each for all its jobs
        try:
            return self._execute(batch, epoch, kept)
        finally:
            kept.release()

    def _execute(self, batch: Batch, epoch: int, kept: Kept) -> PhaseTimes:
        failpoints.phase("read", batch.batch_id)
        clock = Stopwatch()
        records = self.records.frame(batch)
        single = one_task.in_one_task(batch.records, self.one_task_records)
        if single:
            records = records.coalesce(1)
        read = clock.lap()
        before = self.watermark()
        tally = None if self.states is None else self._counted(records)
        io_before = None if tally is None else tally.value
        states = None if self.states is None else self.states.at(batch.version, before, tally, kept)
        result = transform.apply(self.transform, records, self.options, states)
        if single and not self._checked:
            one_task.refuse_shuffles(result.output)
            self._checked = True
        transformed = clock.lap()
        failpoints.phase("write", batch.batch_id)
        counted: Future[Gathered] | None = None
        rejects = (
            None
            if result.rejects is None
            else cut(result.rejects, self.dead_letters.payload_budget)
        )
        if rejects is not None and self.dead_letters.refuses:
            self._dead_letter(rejects, gather(rejects, send=False), batch)
        elif rejects is not None:
            counted = self._counter.submit(gather, rejects, send=self._to_send(batch))
        version = write_version(batch.version, epoch)
        state_writes = (
            []
            if states is None  # transform.apply refuses new state without declarations
            else [
                self._state_writer.submit(state_write.write, states[name], rows, version)
                for name, rows in result.state.items()
            ]
        )
        clock_job = (
            self._state_writer.submit(event_time.newest_and_late, result.event_time)
            if result.event_time is not None and states is not None and states.event_time
            else None
        )
        try:
            records_out = self._write(result.output, version)
        except BaseException:
            pending: list[Future[Any]] = [*state_writes]
            pending += [f for f in (counted, clock_job) if f is not None]
            wait(pending)
            raise  # the write's failure is the one to report
        for written in state_writes:
            written.result()
        newest, late = clock_job.result() if clock_job is not None else (None, 0)
        gathered = counted.result() if counted is not None else Gathered(0, 0)
        wrote = clock.lap()
        io = None if tally is None or io_before is None else tally.value - io_before
        if rejects is not None:
            self._dead_letter(rejects, gathered, batch)
        dead_lettered = clock.lap()
        return PhaseTimes(
            read=read,
            transform=transformed,
            write=wrote,
            records_out=records_out,
            records_in=batch.records,
            records_rejected=gathered.count,
            dead_letter=dead_lettered,
            event_watermark=(
                advance(before, newest, states.event_time.allowed_lateness_seconds)
                if states is not None and states.event_time is not None
                else None
            ),
            records_late=late,
            state=io,
        )

    def _counted(self, records: DataFrame) -> state_tally.Tally:
        """The executor's tally of state requests, made on the first batch's context."""
        if self._tally is None:
            self._tally = state_tally.tally(records.sparkSession.sparkContext)
        return self._tally

    def _to_send(self, batch: Batch) -> bool:
        """Whether this attempt at ``batch`` sends its letters (none durable yet, none
        sent by an earlier attempt), so its rejects are worth collecting."""
        return not letters_written(batch, self._marked) and self._sent != batch.batch_id

    def _dead_letter(self, rejects: DataFrame, gathered: Gathered, batch: Batch) -> None:
        count, size = gathered.count, gathered.size
        if not count:
            return
        if letters_written(batch, self._marked):
            logs.event(
                "dead letters of this batch already durable: not written again",
                batch_id=batch.batch_id,
                rejected=count,
            )
            return
        if self._sent != batch.batch_id:
            failpoints.phase("dead_letter", batch.batch_id)
            rows = (
                gathered.rows if gathered.rows is not None else _reject_rows(rejects, count, size)
            )
            # A driver that was fenced while its batch ran (a partitioned node's, or one
            # a hot standby replaced) would send letters its successor sends again. Read
            # after the collect (a Spark job), so that only the flush follows it.
            self.marks.still_held(batch)
            described = (self.records.describe(_reject(row)) for row in rows)
            self.dead_letters.write(described, batch_id=batch.batch_id, count=count)
            self._sent = batch.batch_id
        else:
            logs.event(
                "dead letters of this batch already sent: recording them durable",
                batch_id=batch.batch_id,
                rejected=count,
            )
        self.marks.letters_durable(batch)
        self._marked = batch.batch_id

    def _write(self, output: DataFrame, version: int) -> int:
        """Rows written; counted by the sink, or else by one more evaluation."""
        written = self.sink.write(output, version)
        return written if written is not None else output.count()


def cut(rejects: DataFrame, budget: int) -> DataFrame:
    """The rejects with each key and value cut to ``budget`` bytes and their original
    sizes beside them, so no reject larger than a letter reaches the driver."""
    key, value = F.col("key").cast("binary"), F.col("value").cast("binary")
    return rejects.select(
        F.substring(key, 1, budget).alias("key"),
        F.substring(value, 1, budget).alias("value"),
        "topic",
        "partition",
        "offset",
        "reason",
        F.length(key).alias("key_size"),
        F.length(value).alias("value_size"),
    )


@dataclass(frozen=True)
class Gathered:
    """A batch's rejects as the job beside the write found them: how many, their
    keys' and values' bytes, and, when they are to be sent and fit
    (:data:`COLLECT_LIMIT`, :data:`COLLECT_BYTES`), their rows."""

    count: int
    size: int
    rows: list[Row] | None = None


def gather(rejects: DataFrame, *, send: bool) -> Gathered:
    """Count the rejects (:func:`measure`) and, if they are to be sent and fit, collect
    them too: both jobs run beside the sink's write, so the letters wait only for
    their flush. Collected after the write, they made the dead-letter phase 0.65 s of
    a 2.5 s batch in the soak (load 6); beside it, 0.04 s."""
    count, size = measure(rejects)
    fits = 0 < count <= COLLECT_LIMIT and size <= COLLECT_BYTES
    return Gathered(count, size, rejects.collect() if send and fits else None)


def measure(rejects: DataFrame) -> tuple[int, int]:
    """How many rejects, and their keys' and values' bytes (one Spark job)."""
    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    row = rejects.agg(F.count(F.lit(1)).alias("n"), F.sum(size).alias("bytes")).first()
    return (0, 0) if row is None else (int(row["n"]), int(row["bytes"] or 0))


def _reject_rows(rejects: DataFrame, count: int, size: int) -> Iterable[Row]:
    """The rejects' rows: collected now when they fit (:data:`COLLECT_LIMIT`,
    :data:`COLLECT_BYTES`), else an iterator that fetches them partition by partition
    while the letters are sent."""
    if count <= COLLECT_LIMIT and size <= COLLECT_BYTES:
        return rejects.collect()
    return rejects.toLocalIterator(prefetchPartitions=True)


def _reject(row: Row) -> Reject:
    return Reject(
        key=_bytes(row["key"]),
        value=_bytes(row["value"]),
        topic=str(row["topic"]),
        partition=int(row["partition"]),
        offset=int(row["offset"]),
        reason=str(row["reason"]),
        key_size=_size(row["key_size"]),
        value_size=_size(row["value_size"]),
    )


def _size(value: int | None) -> int | None:
    return None if value is None else int(value)


def _bytes(value: bytes | bytearray | None) -> bytes | None:
    return None if value is None else bytes(value)
