"""The micro-batch loop (DESIGN.md, "The micro-batch loop").

    claim(epoch) -> recover a planned batch, if any -> loop:
        plan (pure) -> write the plan ahead -> read, transform, write -> commit
    on stop: finish the batch in flight, commit, release

One batch is in flight at a time; any failure ends the loop before another batch is
planned (fail-fast), so nothing is committed past a failed batch. The runner holds
no Spark or Cassandra code: it drives three ports (checkpoint store, watermark
reader, batch executor) that the entry point wires to the real ones, and tells an
:class:`Observer` (metrics, the informative Kafka consumer group) what happened.

With backpressure on, each plan uses the cap the estimator (``backpressure``) drew
from the batches before it, except the driver's first: it warms up the JVM (class
loading, code generation) and takes several times longer than the same batch later,
so it is not observed. A recovered batch keeps the ranges it was planned with.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from sluice_api.spec import OnOffsetOutOfRange
from sluice_job import failpoints, logs, offsets
from sluice_job.backpressure import Estimate, Observation, RateControl
from sluice_job.checkpoint import Batch, Checkpoint, FencedError
from sluice_job.offsets import Positions, TopicPartition, Watermarks
from sluice_job.planner import OffsetOutOfRangeError, Plan, Policy, Skip, plan


class Store(Protocol):
    def claim(self, epoch: int) -> Checkpoint: ...
    def plan(self, batch: Batch) -> None: ...
    def commit(self, batch: Batch, started_at: datetime) -> float:
        """Commit ``batch``; returns the seconds its LWT took."""
        ...

    def release(self) -> bool: ...


class WatermarkSource(Protocol):
    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]: ...


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds per phase of an executed batch, and its record counts."""

    read: float
    transform: float
    write: float
    records_out: int
    records_in: int = 0
    records_rejected: int = 0
    dead_letter: float = 0.0


class Executor(Protocol):
    def execute(self, batch: Batch, epoch: int) -> PhaseTimes: ...


@dataclass(frozen=True)
class Committed:
    """A committed batch as the observers see it."""

    batch: Batch
    times: PhaseTimes | None
    commit_seconds: float
    """The commit LWT and the batch-history row."""
    batch_seconds: float
    commit_lwt_seconds: float = 0.0
    """The commit LWT alone."""
    plan_seconds: float = 0.0
    """The write-ahead plan LWT (0 for a batch planned by an earlier driver)."""


class Observer(Protocol):
    """Told what the loop does; must not raise (it only watches)."""

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None: ...
    def cap(self, records_per_partition: int) -> None: ...
    def skipped(self, skip: Skip) -> None: ...
    def committed(self, done: Committed) -> None: ...
    def failed(self, *, fenced: bool) -> None: ...


class NoObserver:
    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        pass

    def cap(self, records_per_partition: int) -> None:
        pass

    def skipped(self, skip: Skip) -> None:
        pass

    def committed(self, done: Committed) -> None:
        pass

    def failed(self, *, fenced: bool) -> None:
        pass


@dataclass(frozen=True)
class Observers:
    """Several observers as one, told in order."""

    members: tuple[Observer, ...]

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        for member in self.members:
            member.lag(marks, positions)

    def cap(self, records_per_partition: int) -> None:
        for member in self.members:
            member.cap(records_per_partition)

    def skipped(self, skip: Skip) -> None:
        for member in self.members:
            member.skipped(skip)

    def committed(self, done: Committed) -> None:
        for member in self.members:
            member.committed(done)

    def failed(self, *, fenced: bool) -> None:
        for member in self.members:
            member.failed(fenced=fenced)


@dataclass
class Progress:
    """Where the runner is; read by the entry point for the termination message."""

    batch_id: int = 0
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    batches: int = 0
    records: int = 0
    skipped: int = 0


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
    _estimate: Estimate = field(init=False)
    _marks: dict[TopicPartition, Watermarks] = field(init=False, default_factory=dict)
    _warmed_up: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        first = self.initial_cap or self.policy.max_records_per_partition
        self._estimate = Estimate(min(first, self.policy.max_records_per_partition))

    def run(self) -> None:
        """Until ``stop`` is set; raises on any failure (nothing then is committed)."""
        checkpoint = self.store.claim(self.epoch)
        self.progress.batch_id = checkpoint.batch_id
        self.progress.positions = dict(checkpoint.positions)
        logs.event(
            "claimed",
            epoch=self.epoch,
            batch_id=checkpoint.batch_id,
            offsets=offsets.to_json(checkpoint.positions),
        )
        pending = self._recoverable(checkpoint.planned)
        next_start = time.monotonic()
        while not self.stop.is_set():
            if pending is not None:
                self._run_batch(pending, planned_ahead=True)
                pending = None
                continue
            if self.stop.wait(max(0.0, next_start - time.monotonic())):
                break
            next_start = time.monotonic() + self.interval
            batch = self._next_batch()
            if batch is not None:
                self._run_batch(batch, planned_ahead=False)
        self.store.release()
        logs.event("released", epoch=self.epoch, batch_id=self.progress.batch_id)

    @property
    def cap(self) -> int:
        """The per-partition cap the next batch is planned with."""
        return self._estimate.cap if self.rate else self.policy.max_records_per_partition

    def _next_batch(self) -> Batch | None:
        self._marks = self.watermarks.fetch(self.topics)
        self.observer.lag(self._marks, self.progress.positions)
        self.observer.cap(self.cap)
        policy = dataclasses.replace(self.policy, max_records_per_partition=self.cap)
        result = plan(self.progress.positions, self._marks, policy)
        self._report_skips(result)
        if not result.ranges and result.positions == self.progress.positions:
            return None
        return Batch(self.progress.batch_id + 1, result.ranges, dict(result.positions))

    def _run_batch(self, batch: Batch, *, planned_ahead: bool) -> None:
        try:
            self._execute_and_commit(batch, planned_ahead=planned_ahead)
        except FencedError:
            self.observer.failed(fenced=True)
            raise
        except Exception:
            self.observer.failed(fenced=False)
            raise

    def _execute_and_commit(self, batch: Batch, *, planned_ahead: bool) -> None:
        started_at, started = datetime.now(UTC), self.clock()
        if batch.ranges and not planned_ahead:
            self.store.plan(batch)
        planned = self.clock() - started
        times = self.executor.execute(batch, self.epoch) if batch.ranges else None
        failpoints.phase("after_write", batch.batch_id)
        failpoints.phase("commit", batch.batch_id)
        commit_started = self.clock()
        lwt = self.store.commit(batch, started_at)
        commit = self.clock() - commit_started
        self.progress.batch_id, self.progress.positions = batch.batch_id, dict(batch.positions)
        self.progress.batches += 1
        self.progress.records += batch.records
        done = Committed(batch, times, commit, self.clock() - started, lwt, planned)
        self._report(done, planned_ahead)

    def _report(self, done: Committed, recovered: bool) -> None:
        batch, times = done.batch, done.times
        self.observer.committed(done)
        self.observer.lag(self._marks, self.progress.positions)
        logs.event(
            "batch",
            batch_id=batch.batch_id,
            epoch=self.epoch,
            recovered=recovered,
            ranges=offsets.ranges_json(batch.ranges),
            records=batch.records,
            records_out=times.records_out if times else 0,
            rejected=times.records_rejected if times else 0,
            read_s=round(times.read, 4) if times else 0.0,
            transform_s=round(times.transform, 4) if times else 0.0,
            dead_letter_s=round(times.dead_letter, 4) if times else 0.0,
            write_s=round(times.write, 4) if times else 0.0,
            commit_s=round(done.commit_seconds, 4),
            commit_lwt_s=round(done.commit_lwt_seconds, 4),
            plan_s=round(done.plan_seconds, 4),
            batch_s=round(done.batch_seconds, 4),
        )
        self._observe_rate(batch, done.batch_seconds)

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

    def _recoverable(self, planned: Batch | None) -> Batch | None:
        """A batch planned by a previous driver and never committed is re-executed
        exactly as planned, unless retention deleted part of it meanwhile."""
        if planned is None or not planned.ranges:
            return planned
        marks = self._marks = self.watermarks.fetch(self.topics)
        lost = [r for r in planned.ranges if r.tp in marks and r.start < marks[r.tp].low]
        if not lost:
            logs.event(
                "recovering planned batch",
                batch_id=planned.batch_id,
                ranges=offsets.ranges_json(planned.ranges),
            )
            return planned
        if self.policy.on_out_of_range is OnOffsetOutOfRange.FAIL:
            first = lost[0]
            raise OffsetOutOfRangeError(first.tp, first.start, marks[first.tp])
        logs.event(
            "discarding planned batch: retention deleted part of it",
            batch_id=planned.batch_id,
            ranges=offsets.ranges_json(lost),
        )
        return None

    def _report_skips(self, result: Plan) -> None:
        for skip in result.skips:
            self.progress.skipped += skip.count
            self.observer.skipped(skip)
            logs.event(
                "skipped records deleted by retention",
                level=30,
                partition=str(skip.tp),
                committed=skip.committed,
                resumed_at=skip.resumed_at,
                skipped=skip.count,
            )
