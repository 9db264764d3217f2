"""A driver started as the standby of a warm handover (``spec.upgrade.mode:
WarmHandover``), up to the moment it claims its epoch.

Why it exists: a clean-stop upgrade stops the old driver, then starts the new one, so
the pipeline waits for a JVM, a SparkSession and its connections. A standby does all
that while the old driver still runs, and only then takes over: the fencing of the
checkpoint store makes two drivers at once safe, since the standby cannot commit
before it holds the epoch, and it claims only once the old one is done.

Before the claim, the standby (``SLUICE_STANDBY=1``, set by the operator):

1. has started Spark and reached Kafka and the stores (``driver`` did so already);
2. checks the transform on an empty frame of the source's schema (:func:`check`): it
   is called, its rejects' shape and determinism checked as for a batch, and its
   output goes through the sink's write, which checks its columns against the table
   and writes no row; this also warms the write path, whose first run in a new JVM
   costs far more than a batch (Python workers, imports, the sink's connections);
   then it reads the last committed records of each partition again (up to
   :data:`WARM_UP_RECORDS` each) and runs the first batch's jobs over them, twice
   (:data:`WARM_UP_RUNS`), the sink's write as a dry run that sends nothing
   (:func:`warm_read`), which warms Spark's Kafka consumers, the plans and code of a
   batch with rows and the sink's executor side;
3. says it is ready: ``sluice_standby_ready`` 1 on its ``/metrics`` (the operator reads
   it, as it reads a running driver's progress, and then stops the old driver
   cleanly);
4. waits, without claiming, planning or writing, until the checkpoint row says the
   previous epoch released the pipeline (a poll every :data:`POLL_SECONDS`), or until
   ``upgrade.stopTimeoutSeconds`` have passed since it became ready: then it claims
   anyway and so fences the old driver, whose batch in flight (planned, not committed)
   it runs again as planned (:func:`turn` decides, a pure function).

A standby asked to stop (SIGTERM) before its turn leaves without claiming. A check
that fails ends it with exit 2 (``TransformCheckFailed``): the operator reports the
upgrade failed and the old driver goes on. Once it runs, :class:`HandoverGap` records
the handover gap: from the previous epoch's last commit to this driver's first, a
metric (``sluice_handover_gap_seconds``) and a log line; the batch history holds both
commits (their ``epoch`` and ``committed_at``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_job import execute, keys, logs, metrics, outages, reader, stopping, transform
from sluice_job.checkpoint_rows import Checkpoint
from sluice_job.deadletter import NoDeadLetters
from sluice_job.execute import Sink
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_job.ports import Committed, NoObserver
from sluice_job.reader import KAFKA_RECORD
from sluice_job.state.handle import LATEST, States
from sluice_job.transform import TransformFn

POLL_SECONDS: Final = 0.1
"""How often a ready standby reads the checkpoint row for the previous epoch's release."""

WARM_UP_RECORDS: Final = 50
"""How many of each partition's last committed records the warm-up reads again: about
what a batch of a busy pipeline holds per task, so the executors' per-row code (Kafka
records, Arrow, the transform, the sink's binding) has run on as many rows as a first
batch brings. Measured by ``bench.handover`` (200 events/s, 4 partitions): the first
batch's write took 1.5 s after a warm-up over one record per partition, 1.0-1.6 s
after 50, against 0.6-0.8 s for a running driver's."""

WARM_UP_RUNS: Final = 2
"""How often a standby runs the warm-up before it says ready. The second run is the
one whose plans and code the first batch finds compiled: in ``bench.handover`` the
first batch took 1.2-1.4 s after two runs, 1.3-2.0 s after one, and the upgrade gap's
median went from 1.66 s to 1.47 s. It costs the standby a second or two before it is
ready, while the old driver still runs."""


WARM_UP_TAG: Final = "sluice-standby-warm-up"
"""The Spark job tag of a standby's check and warm-up (:func:`warming`): the jobs a
promotion cancels (:func:`cancel_warm_up_on`), and only those: a batch's jobs never
carry it."""


class StandbyCheckError(ValueError):
    """The transform fails on an empty batch of the source's schema (exit 2)."""


class Turn(StrEnum):
    WAIT = "wait"
    CLAIM = "claim"
    """The pipeline is free: released by the previous epoch, never held, or already
    held by an epoch as new as this one (the claim then says fenced)."""
    FENCE = "fence"
    """The previous driver did not release within the stop timeout: claim anyway."""


def turn(checkpoint: Checkpoint, epoch: int, waited: float, timeout: float) -> Turn:
    """Whether a ready standby of ``epoch`` may claim, having waited ``waited`` seconds."""
    if checkpoint.owner is None or checkpoint.epoch >= epoch or checkpoint.released:
        return Turn.CLAIM
    if waited >= timeout:
        return Turn.FENCE
    return Turn.WAIT


def empty_records(spark: SparkSession) -> DataFrame:
    """No records, with the columns a batch's records have (``reader.read``), in one
    empty partition per task slot. Made from an RDD, not a local relation: Spark's
    optimizer cannot tell it is empty, so every stage of a plan over it runs."""
    slots = max(1, spark.sparkContext.defaultParallelism)
    frame = spark.createDataFrame(spark.sparkContext.parallelize([], slots), KAFKA_RECORD)
    frame = frame.withColumn(reader.BATCH_ID_COLUMN, F.lit(0).cast("long"))
    return frame.withColumn(keys.POSITION, keys.position())


def check(
    records: DataFrame,
    function: TransformFn,
    options: Mapping[str, Any],
    sink: Sink | None,
    states: States | None = None,
) -> None:
    """Run the transform on ``records`` (empty) as a batch would, and its output
    through ``sink``'s write: no row is written, but the sink checks the output's
    columns against its table and the write path warms up (Spark's Python workers
    start, import the sink and open its connections, which they keep for the first
    batch). Adaptive execution is off meanwhile: it would skip every stage after an
    empty shuffle, and with them the warming. Raises :class:`StandbyCheckError`
    naming what failed."""
    try:
        with _every_stage(records.sparkSession):
            result = transform.apply(function, records, options, _latest(states))
            written = sink.write(result.output, 0) if sink is not None else result.output.count()
            if result.rejects is not None:
                result.rejects.count()
            for rows in result.state.values():
                rows.count()
    except Exception as err:  # the user's code: any failure fails the check
        raise StandbyCheckError(
            f"the transform fails on an empty batch of the source's schema: "
            f"{type(err).__name__}: {err}"
        ) from err
    if written:
        raise StandbyCheckError(f"an empty batch gave {written} rows: the transform makes rows")


def _latest(states: States | None) -> States | None:
    """The states as a standby's check and warm-up read them: the newest rows,
    whichever batch wrote them (they write nothing, so none is theirs)."""
    return None if states is None else states.at(LATEST)


@contextlib.contextmanager
def _every_stage(spark: SparkSession) -> Iterator[None]:
    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before if before is not None else "true")


@contextlib.contextmanager
def warming(spark: SparkSession) -> Iterator[None]:
    """Tag the Spark jobs this thread starts meanwhile with :data:`WARM_UP_TAG`."""
    context = spark.sparkContext
    context.addJobTag(WARM_UP_TAG)
    try:
        yield
    finally:
        context.removeJobTag(WARM_UP_TAG)


def cancel_warm_up_on(promoted: threading.Event, spark: SparkSession) -> threading.Thread:
    """Once ``promoted`` is set, cancel the jobs of the check and warm-up still running
    (:data:`WARM_UP_TAG`): a promoted standby claims at once, and a check or warm-up
    left to finish held the claim up. In the soak a replacement promoted when its
    driver's node was lost claimed 6.1 s after its promotion, the time its check's
    cold Spark job took. Returns the thread that waits for the promotion."""

    def cancel() -> None:
        promoted.wait()
        try:
            spark.sparkContext.cancelJobsWithTag(WARM_UP_TAG)
        except Exception as err:  # Spark already stopping: nothing left to cancel
            logs.event("warm-up jobs not cancelled", level=30, message=str(err)[:500])

    thread = threading.Thread(target=cancel, name="cancel-warm-up", daemon=True)
    thread.start()
    return thread


def warm_ranges(
    positions: Mapping[TopicPartition, int],
    lows: Mapping[TopicPartition, int],
    records: int = WARM_UP_RECORDS,
) -> list[OffsetRange]:
    """The last ``records`` committed offsets of each partition (``positions``: the
    next to read), none below the partition's oldest retained offset (``lows``, a
    partition missing there counts from 0): reading below it would fail the read."""
    ranges = []
    for tp, end in sorted(positions.items()):
        start = max(lows.get(tp, 0), end - records, 0)
        if start < end:
            ranges.append(OffsetRange(tp, start, end))
    return ranges


def warm_read(
    spark: SparkSession,
    kafka_config: Mapping[str, str],
    positions: Mapping[TopicPartition, int],
    function: TransformFn,
    options: Mapping[str, Any],
    sink: Sink | None = None,
    reject_budget: int = NoDeadLetters.payload_budget,
    lows: Callable[[], Mapping[TopicPartition, int]] = dict,
    states: States | None = None,
) -> int:
    """Run the first batch's Spark jobs over the last committed records of each
    partition again (:func:`warm_ranges`, the oldest retained offsets from ``lows``),
    writing nothing: the rejects are cut and counted as a batch
    counts them (``execute.measure``, ``reject_budget`` as the dead-letter writer's),
    and the output goes through ``sink``'s dry-run write (``Sink.write(dry=True)``),
    the batch's own job (Kafka read, transform, one row per key, ``mapInArrow`` into
    the sink's executor code, which binds and groups the rows but sends nothing).
    Adaptive execution is on, as for a batch. Rows are never written: a batch's
    output from a few records would replace an aggregate's stored value with a wrong
    one. What this warms, that the empty check did not: Spark's Kafka consumers
    (pooled per group id and partition, so the first batch takes them over) and the
    JVM's side of the write job with rows (its plan, generated code and the Arrow
    hand-over), which counting the output prunes away: measured in a fresh JVM, the
    first batch's jobs cost 2.4 to 3.2 CPU seconds more than the next ones after a
    count, 0.7 to 0.9 s more after this (the sink's Python side costs milliseconds
    either way). Without a sink the output is counted. A stateful transform looks up
    the newest state (``_latest``) and its new states are counted, never written.
    Best effort: returns how many offsets it read, 0 when nothing could be read
    (nothing committed yet, retention deleted it, Kafka away); never raises, and logs
    what it skipped."""
    if not any(end > 0 for end in positions.values()):
        return 0
    step, started = "watermarks", time.monotonic()
    try:
        ranges = warm_ranges(positions, lows())
        if not ranges:
            return 0
        step = "read"
        records = reader.read(spark, kafka_config, ranges, 0)
        step = "transform"
        result = transform.apply(function, records, options, _latest(states))
        rejected = None
        if result.rejects is not None:
            step = "rejects"
            rejected, _ = execute.measure(execute.cut(result.rejects, reject_budget))
        step = "dry-run write" if sink is not None else "count"
        rows = sink.write(result.output, 0, dry=True) if sink is not None else result.output.count()
        step = "state lookups"
        state_rows = {name: frame.count() for name, frame in result.state.items()}
        logs.event(
            "standby warm-up",
            state_rows=state_rows or None,
            partitions=len(ranges),
            offsets=sum(r.end - r.start for r in ranges),
            rejected=rejected,
            rows=rows,
            dry_run_write=sink is not None,
            seconds=round(time.monotonic() - started, 3),
        )
        return sum(r.end - r.start for r in ranges)
    except Exception as err:  # a warm-up only: the first batch pays instead
        logs.event("standby warm-up read skipped", level=30, step=step, message=str(err)[:500])
        return 0


class CheckpointReader(Protocol):
    def load(self, *, serial: bool = False) -> Checkpoint: ...


@dataclass(frozen=True)
class Predecessor:
    """The driver this standby takes over from, as the checkpoint row showed it."""

    epoch: int
    batch_id: int
    committed_at: datetime | None
    """When it committed ``batch_id`` (the batch history), if known."""
    turn: Turn


def read_row(store: CheckpointReader, stop: threading.Event, poll: float) -> Checkpoint | None:
    """The checkpoint row; ``None`` after waiting ``poll`` when an outage keeps it (a
    standby holds nothing yet: it only tries again)."""
    try:
        return store.load()
    except Exception as err:
        if outages.dependency_of(err) is None:
            raise
        stop.wait(poll)
        return None


def wait_for_turn(
    store: CheckpointReader,
    epoch: int,
    stop: threading.Event,
    timeout: float,
    *,
    last_commit: Callable[[int], datetime | None] = lambda _batch_id: None,
    clock: Callable[[], float] = time.monotonic,
    poll: float = POLL_SECONDS,
    promoted: threading.Event | None = None,
) -> Predecessor | None:
    """Read the checkpoint row every ``poll`` seconds until it is this standby's turn
    (:func:`turn`); ``None`` if ``stop`` is set first. A read that fails (Cassandra
    away) is tried again at the next poll: the standby holds nothing yet. Once
    ``promoted`` is set (the operator saw the old driver exit, or its node lost), the
    stop timeout counts as passed."""
    since = clock()
    while not stop.is_set():
        checkpoint = read_row(store, stop, poll)
        if checkpoint is None:
            continue
        waited = timeout if promoted is not None and promoted.is_set() else clock() - since
        decided = turn(checkpoint, epoch, waited, timeout)
        if decided is not Turn.WAIT:
            return Predecessor(
                checkpoint.epoch, checkpoint.batch_id, last_commit(checkpoint.batch_id), decided
            )
        stop.wait(poll)
    return None


def get_ready(
    *,
    pipeline: str,
    epoch: int,
    spark: SparkSession,
    function: TransformFn,
    options: Mapping[str, Any],
    sink: Sink | None,
    kafka_config: Mapping[str, str],
    store: CheckpointReader,
    reject_budget: int = NoDeadLetters.payload_budget,
    lows: Callable[[], Mapping[TopicPartition, int]] = dict,
    stop: threading.Event | None = None,
    promoted: threading.Event | None = None,
    states: States | None = None,
) -> Callable[[], int]:
    """Check, warm up (:data:`WARM_UP_RUNS` times), say ready (``sluice_standby_ready``
    1); returns the warm-up, which a hot standby runs again while it waits. ``lows``:
    each partition's oldest retained offset (the watermarks). A ``stop`` ends it
    between two steps (``stopping.StopRequestedError``): the standby holds nothing yet.

    A hot standby ``promoted`` while it gets ready (its driver lost before it was
    ready) skips what is left of its check and warm-up and says ready at once: the
    running spec's driver has already passed the check, and a warm-up takes 16-48 s
    on two cores, longer than a cold driver takes to claim and run its first batch.
    The check's and warm-up's Spark jobs carry :data:`WARM_UP_TAG`, so that the
    promotion can cancel the one in flight (:func:`cancel_warm_up_on`); a check that
    fails once promoted was cut short, not failed."""
    started = time.monotonic()
    stop = stop or threading.Event()
    promoted = promoted or threading.Event()

    def warm() -> int:
        positions = store.load().positions
        with warming(spark):
            return warm_read(
                spark,
                kafka_config,
                positions,
                function,
                options,
                sink,
                reject_budget,
                lows,
                states,
            )

    warmed = 0
    if not promoted.is_set():
        stopping.check(stop, "the transform check")
        try:
            with warming(spark):
                check(empty_records(spark), function, options, sink, states)
        except StandbyCheckError as err:
            stopping.check(stop, "the transform check")  # cancelled by the stop, not failed
            if not promoted.is_set():
                raise
            logs.event("standby's check cut short by its promotion", message=str(err)[:300])
    for _ in range(WARM_UP_RUNS):
        stopping.check(stop, "the standby's warm-up")
        if promoted.is_set():
            break
        warmed = warm()
    stopping.check(stop, "the standby's warm-up")
    metrics.STANDBY_READY.labels(pipeline).set(1)
    seconds = round(time.monotonic() - started, 3)
    logs.event(
        "standby ready",
        epoch=epoch,
        seconds=seconds,
        warm_up_records=warmed,
        cut_short_by_promotion=promoted.is_set(),
    )
    return warm


def take_over(
    ready: Callable[[], object],
    *,
    pipeline: str,
    epoch: int,
    store: CheckpointReader,
    last_commit: Callable[[int], datetime | None],
    stop: threading.Event,
    timeout: float,
    promoted: threading.Event | None = None,
) -> HandoverGap | None:
    """Get ``ready`` (:func:`get_ready`), wait for the turn; the observer recording the
    handover gap, or ``None`` when asked to stop before the turn came (nothing was
    claimed)."""
    ready()
    predecessor = wait_for_turn(
        store, epoch, stop, timeout, last_commit=last_commit, promoted=promoted
    )
    if predecessor is None:
        logs.event("standby stopped before its turn: nothing claimed", epoch=epoch)
        return None
    metrics.STANDBY_READY.labels(pipeline).set(0)
    logs.event(
        "standby takes over"
        if predecessor.turn is not Turn.FENCE
        else "standby takes over: the previous driver did not release in time, fencing it",
        level=20 if predecessor.turn is not Turn.FENCE else 30,
        epoch=epoch,
        previous_epoch=predecessor.epoch,
        batch_id=predecessor.batch_id,
    )
    return HandoverGap(pipeline, epoch, predecessor)


def wait_only(
    pipeline: str, epoch: int, store: CheckpointReader, stop: threading.Event, timeout: float
) -> bool:
    """A standby of a Pub/Sub pipeline: ready once started (the transform is not
    checked: its records have another schema), then its turn as above; whether it came
    (``False``: asked to stop first)."""
    metrics.STANDBY_READY.labels(pipeline).set(1)
    logs.event("standby ready", epoch=epoch, checked=False)
    return wait_for_turn(store, epoch, stop, timeout) is not None


@dataclass
class HandoverGap(NoObserver):
    """Tells the gap between the previous epoch's last commit and this driver's first."""

    pipeline: str
    epoch: int
    predecessor: Predecessor
    wall: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    gap: float | None = None

    def committed(self, done: Committed) -> None:
        if self.gap is not None or self.predecessor.committed_at is None:
            return
        self.gap = (self.wall() - self.predecessor.committed_at).total_seconds()
        metrics.HANDOVER_GAP.labels(self.pipeline).set(self.gap)
        logs.event(
            "handover gap",
            gap_s=round(self.gap, 3),
            previous_epoch=self.predecessor.epoch,
            previous_batch_id=self.predecessor.batch_id,
            epoch=self.epoch,
            batch_id=done.batch.batch_id,
            fenced=self.predecessor.turn is Turn.FENCE,
        )
