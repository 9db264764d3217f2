"""The micro-batch loop (docs/design.md): plan -> write -> commit, one batch at a time.

    claim(epoch) -> report it and the lag -> apply an offset reset, if asked
    -> recover a planned batch -> loop:
        plan (pure) -> write the plan ahead -> read, transform, write -> commit
    on stop: finish the batch in flight, commit, release; with none in flight,
    stop at once and begin none (``stopping``)

One batch is in flight at a time; any failure ends the loop before another batch is
planned (fail-fast), so nothing is committed past a failed batch. The runner holds
no Spark or Cassandra code: it drives the ports of ``ports`` (checkpoint store,
watermark reader, batch executor) and tells an observer what happened. A batch's
timing lives in ``batch``, its failpoints in ``announce`` (wrappers of the ports).
Lag counts from where the next plan reads (``planner.starts``) from the claim on, and
is measured again while a batch runs (``lagwatch``).

With backpressure on, each plan uses the cap the estimator (``backpressure``) drew
from the batches before it, except the driver's first: it warms up the JVM (class
loading, code generation) and takes several times longer than the same batch later,
so it is not observed. A recovered batch keeps the ranges it was planned with.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from sluice_api.offset_reset import OffsetReset, ResetTo
from sluice_api.source import OnOffsetOutOfRange
from sluice_job import announce, logs, offsets, outages, reset, stopping, write_order
from sluice_job.backpressure import Estimate, Observation, RateControl
from sluice_job.batch import BatchRun, attempted, deadline, log_fields
from sluice_job.checkpoint_rows import Batch, Checkpoint
from sluice_job.lagwatch import EVERY_SECONDS, LagWatch
from sluice_job.offsets import TopicPartition, Watermarks
from sluice_job.planner import OffsetOutOfRangeError, Policy, Skip, plan, retained, starts
from sluice_job.ports import (
    Committed,
    Executor,
    NoObserver,
    Observer,
    Observers,
    PhaseTimes,
    Store,
    WatermarkSource,
    with_watermark,
)

__all__ = ["Committed", "Observer", "Observers", "PhaseTimes", "Progress", "Runner"]

T = TypeVar("T")

IDLE_FIRST = 0.05
IDLE_MAX = 1.0
"""Seconds between looks at Kafka while there is no new data: doubling from
``IDLE_FIRST`` to ``IDLE_MAX`` (never below the trigger interval), so an idle pipeline
with ``intervalSeconds: 0`` does not poll Kafka in a tight loop, and new data waits at
most ``IDLE_MAX`` seconds."""
IDLE_MAX_LOW_LATENCY = 0.1
"""``IDLE_MAX`` of ``trigger.mode: LowLatency``: new data waits at most 0.1 s to be
seen, for ten metadata requests a second to the brokers while the topic is idle."""


def idle_after(seconds: float, ceiling: float = IDLE_MAX) -> float:
    return min(ceiling, seconds * 2)


@dataclass
class Progress:
    """Where the runner is; read by the entry point for the termination message."""

    batch_id: int = 0
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    version: int = 0
    """The write version of batch ``batch_id`` (``write_order``)."""
    batches: int = 0
    records: int = 0
    skipped: int = 0
    gate: stopping.BatchGate = field(default_factory=stopping.BatchGate)
    """The batch in flight, and whether a stop lets another begin."""

    def resume(self, checkpoint: Checkpoint) -> None:
        """Where a driver starts: the claimed checkpoint."""
        self.batch_id, self.positions = checkpoint.batch_id, dict(checkpoint.positions)
        self.version = checkpoint.version

    def advance(self, batch: Batch) -> None:
        """``batch`` was committed."""
        self.batch_id, self.positions = batch.batch_id, dict(batch.positions)
        self.version = batch.version
        self.batches += 1
        self.records += batch.records


@dataclass
class Runner:
    epoch: int
    topics: Sequence[str]
    policy: Policy
    interval: float
    store: Store
    watermarks: WatermarkSource
    executor: Executor
    stop: threading.Event = field(default_factory=threading.Event)
    progress: Progress = field(default_factory=Progress)
    observer: Observer = field(default_factory=NoObserver)
    rate: RateControl | None = None
    """Backpressure; ``None`` plans every batch with ``policy``'s cap."""
    initial_cap: int | None = None
    clock: Callable[[], float] = time.perf_counter
    """Times batches (seconds); tests pass a fake."""
    wall: Callable[[], float] = time.time
    """The wall clock that batch versions follow (``write_order``); tests pass a fake."""
    pause: Callable[[float], None] | None = None
    """Waits between attempts through a dependency outage; tests pass a fake.
    ``None``: sleeps, or between batches waits on ``stop`` (which cuts it short)."""
    batch_timeout: float | None = None
    """Seconds one attempt of a batch may take before ``on_timeout`` is called."""
    idle_max: float = IDLE_MAX
    """The longest wait between looks at Kafka while there is no new data."""
    on_timeout: Callable[[int, float], None] | None = None
    """Called from a timer thread with the batch id and the timeout; ends the driver."""
    offset_reset: OffsetReset | None = None
    """``spec.offsetReset``: applied after the claim unless the checkpoint has its id."""
    lag_watermarks: WatermarkSource | None = None
    """A reader of its own for measuring lag while a batch runs (``lagwatch``);
    ``None``: lag is measured only at the claim, at each plan and after each commit."""
    lag_every: float = EVERY_SECONDS
    _estimate: Estimate = field(init=False)
    _marks: dict[TopicPartition, Watermarks] = field(init=False, default_factory=dict)
    _warmed_up: bool = field(init=False, default=False)
    _store: Store = field(init=False)
    """``store`` announcing the failpoints between the loop's steps."""
    _executor: Executor = field(init=False)

    def __post_init__(self) -> None:
        first = self.initial_cap or self.policy.max_records_per_partition
        self._estimate = Estimate(min(first, self.policy.max_records_per_partition))

    def run(self) -> None:
        """Until ``stop`` is set; raises on any failure (nothing then is committed).
        A stop with no batch in flight ends it at once: before the claim it raises
        ``StopRequestedError`` (nothing claimed), after it the driver releases."""
        self._store = announce.AnnouncingStore(self.store)
        self._executor = announce.AnnouncingExecutor(self.executor)
        checkpoint = self._retrying("claim", lambda: self._store.claim(self.epoch))
        self.progress.resume(checkpoint)
        self.observer.resumed(checkpoint)
        logs.event(
            "claimed",
            epoch=self.epoch,
            batch_id=checkpoint.batch_id,
            offsets=offsets.to_json(checkpoint.positions),
        )
        watch = None
        try:
            self._marks = self._retrying("kafka", lambda: self.watermarks.fetch(self.topics))
            self._report_lag(self._marks)
            watch = self._watch()
            self._loop(checkpoint)
        except stopping.StopRequestedError as stopped:
            logs.event("stopped with no batch in flight", left_undone=stopped.step)
        finally:
            if watch is not None:
                watch.close()
        if outages.best_effort("release", self._store.release, self.observer):
            logs.event("released", epoch=self.epoch, batch_id=self.progress.batch_id)

    def _loop(self, checkpoint: Checkpoint) -> None:
        if self.offset_reset is not None and self.offset_reset.id not in checkpoint.resets:
            request = self.offset_reset
            self._retrying("offset reset", lambda: self._reset(request, checkpoint))
            checkpoint = dataclasses.replace(checkpoint, planned=None)
        pending = self._retrying("recover", lambda: self._recoverable(checkpoint.planned))
        next_start, idle = time.monotonic(), IDLE_FIRST
        while not self.stop.is_set():
            if pending is not None:
                self._run_batch(pending, planned_ahead=True)
                pending = None
                continue
            if self.stop.wait(max(0.0, next_start - time.monotonic())):
                break
            looked = time.monotonic()
            batch = self._retrying("plan", self._next_batch)
            if batch is None:  # no new data: look again later and later, up to idle_max
                next_start = looked + max(self.interval, idle)
                idle = idle_after(idle, self.idle_max)
                continue
            next_start, idle = looked + self.interval, IDLE_FIRST
            self._run_batch(batch, planned_ahead=False)

    def _watch(self) -> LagWatch | None:
        source = self.lag_watermarks
        if source is None:
            return None
        watch = LagWatch(lambda: self._report_lag(source.fetch(self.topics)), self.lag_every)
        watch.start()
        return watch

    def _report_lag(self, marks: dict[TopicPartition, Watermarks]) -> None:
        """Lag against ``marks``: from where the next plan reads (``planner.starts``:
        committed offsets, or the starting offsets before any commit) to the end."""
        self.observer.lag(marks, starts(self.progress.positions, marks, self.policy))

    @property
    def cap(self) -> int:
        """The per-partition cap the next batch is planned with."""
        return self._estimate.cap if self.rate else self.policy.max_records_per_partition

    def _next_batch(self) -> Batch | None:
        self._marks = self.watermarks.fetch(self.topics)
        self._report_lag(self._marks)
        self.observer.cap(self.cap)
        policy = dataclasses.replace(self.policy, max_records_per_partition=self.cap)
        result = plan(self.progress.positions, self._marks, policy)
        self._report_skips(result.skips)
        starts = {r.tp: r.start for r in result.ranges}
        for tp in result.added:
            logs.event(
                "new partition: reading it from its earliest offset",
                partition=str(tp),
                start=starts.get(tp, result.positions.get(tp)),
            )
        if not result.ranges and result.positions == self.progress.positions:
            return None
        return Batch(
            self.progress.batch_id + 1, result.ranges, dict(result.positions), self._version()
        )

    def _version(self) -> int:
        return write_order.next_version(self.progress.version, self.wall())

    def _retrying(self, step: str, call: Callable[[], T]) -> T:
        """``call``, run again through outages of Cassandra, Kafka or Datastore: the
        driver keeps its epoch and its batch and waits (``outages``), until a stop:
        no batch is in flight meanwhile (``stopping``)."""
        return outages.through_outages(step, call, self.observer, pause=self.pause, stop=self.stop)

    def _run_batch(self, batch: Batch, *, planned_ahead: bool) -> None:
        """Batch ``batch`` to its commit, unless a stop came first (``StopRequestedError``)."""
        if self.stop.is_set() or not self.progress.gate.begin(batch.batch_id):
            raise stopping.StopRequestedError(f"batch {batch.batch_id}")
        attempt = partial(self._execute_and_commit, batch, planned_ahead=planned_ahead)
        try:
            attempted(batch.batch_id, attempt, self.observer, self.pause or time.sleep)
        finally:
            self.progress.gate.end()

    def _execute_and_commit(self, batch: Batch, *, planned_ahead: bool) -> None:
        with deadline(batch.batch_id, self.batch_timeout, self.on_timeout):
            self._attempt(batch, planned_ahead=planned_ahead)

    def _attempt(self, batch: Batch, *, planned_ahead: bool) -> None:
        run = BatchRun(self.clock, batch=batch)
        if batch.ranges and not planned_ahead:
            run.timed("plan", lambda: self._store.plan(batch))
        times = self._executor.execute(batch, self.epoch) if batch.ranges else None
        done = with_watermark(batch, times)
        lwt = run.timed("commit", lambda: self._store.commit(done, run.started_at))
        self._advance(batch)
        self._report(run.committed(times, lwt), recovered=planned_ahead)

    def _advance(self, batch: Batch) -> None:
        self.progress.advance(batch)

    def _report(self, done: Committed, *, recovered: bool) -> None:
        self.observer.committed(done)
        self._report_lag(self._marks)
        logs.event("batch", **log_fields(done, epoch=self.epoch, recovered=recovered))
        self._observe_rate(done.batch, done.batch_seconds)

    def _observe_rate(self, batch: Batch, seconds: float) -> None:
        if self.rate is None or not batch.ranges:
            return
        if not self._warmed_up:
            self._warmed_up = True
            return
        largest = max(r.count for r in batch.ranges)
        before = self._estimate.cap
        seen = Observation(largest, seconds, capped=largest >= before)
        self._estimate = self._estimate.observe(seen, self.rate)
        if self._estimate.cap != before:
            logs.event(
                "backpressure",
                batch_id=batch.batch_id,
                batch_s=round(seconds, 4),
                target_s=round(self.rate.target_seconds, 4),
                cap_before=before,
                cap=self._estimate.cap,
            )

    def _reset(self, request: OffsetReset, checkpoint: Checkpoint) -> None:
        """Move the positions as ``request`` asks, as a batch of its own (``reset``)."""
        self._marks = self.watermarks.fetch(self.topics)
        at_time = (
            self.watermarks.at_time(self.topics, request.epoch_millis())
            if request.to is ResetTo.TIMESTAMP
            else None
        )
        before = dict(self.progress.positions)
        after = reset.targets(request, before, self._marks, at_time)
        applied = reset.AppliedReset(request, before, after)
        batch = Batch(self.progress.batch_id + 1, (), after, self._version())
        self._store.reset(batch, request.id, applied.history_json())
        self._advance(batch)
        logs.event(
            "offset reset",
            reset_id=request.id,
            to=request.to.value,
            requested_by=request.requested_by,
            reason=request.reason,
            batch_id=batch.batch_id,
            dropped_planned=checkpoint.planned.batch_id if checkpoint.planned else None,
            offsets_before=offsets.to_json(before),
            offsets=offsets.to_json(after),
        )
        self.observer.committed(Committed(batch, None, 0.0, 0.0))
        self._report_lag(self._marks)

    def _recoverable(self, planned: Batch | None) -> Batch | None:
        """A batch planned by a previous driver and never committed is re-executed as
        planned: the same id, the same end offsets. If retention deleted the start of a
        range meanwhile, that range starts at the oldest retained offset and the loss
        is reported (``onOffsetOutOfRange: earliest``) or fails the driver (``fail``);
        the id is never re-planned with other ends (outputs keyed by batch id would
        count records twice)."""
        if planned is not None and not planned.version:  # planned before versions
            planned = dataclasses.replace(planned, version=self._version())
        if planned is None or not planned.ranges:
            return planned
        marks = self._marks = self.watermarks.fetch(self.topics)
        kept, skips = retained(planned.ranges, marks)
        if skips and self.policy.on_out_of_range is OnOffsetOutOfRange.FAIL:
            first = skips[0]
            raise OffsetOutOfRangeError(first.tp, first.committed, marks[first.tp])
        recovered = dataclasses.replace(planned, ranges=kept, lost=tuple(skips))
        self._report_skips(skips, batch_id=planned.batch_id)
        logs.event(
            "recovering planned batch",
            batch_id=planned.batch_id,
            ranges=offsets.ranges_json(recovered.ranges),
        )
        return recovered

    def _report_skips(self, skips: Sequence[Skip], batch_id: int | None = None) -> None:
        for skip in skips:
            self.progress.skipped += skip.count
            self.observer.skipped(skip)
            logs.event(
                "committed offset beyond the end of the partition (topic recreated or "
                "truncated): reading it again from its earliest offset"
                if skip.beyond_end
                else "skipped records deleted by retention",
                level=30,
                partition=str(skip.tp),
                committed=skip.committed,
                resumed_at=skip.resumed_at,
                skipped=skip.count,
                batch_id=batch_id,
            )
