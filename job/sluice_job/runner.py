"""The micro-batch loop (DESIGN.md, "The micro-batch loop").

    claim(epoch) -> recover a planned batch, if any -> loop:
        plan (pure) -> write the plan ahead -> read, transform, write -> commit
    on stop: finish the batch in flight, commit, release

One batch is in flight at a time; any failure ends the loop before another batch is
planned (fail-fast), so nothing is committed past a failed batch. The runner holds
no Spark or Cassandra code: it drives three ports (checkpoint store, watermark
reader, batch executor) that the entry point wires to the real ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from sluice_job import failpoints, logs, offsets
from sluice_job.checkpoint import Batch, Checkpoint
from sluice_job.offsets import TopicPartition, Watermarks
from sluice_job.planner import OffsetOutOfRangeError, Plan, Policy, plan
from sluice_job.spec import OnOffsetOutOfRange


class Store(Protocol):
    def claim(self, epoch: int) -> Checkpoint: ...
    def plan(self, batch: Batch) -> None: ...
    def commit(self, batch: Batch, started_at: datetime) -> None: ...
    def release(self) -> bool: ...


class WatermarkSource(Protocol):
    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]: ...


@dataclass(frozen=True)
class PhaseTimes:
    read: float
    transform: float
    write: float
    records_out: int


class Executor(Protocol):
    def execute(self, batch: Batch, epoch: int) -> PhaseTimes: ...


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

    def _next_batch(self) -> Batch | None:
        result = plan(self.progress.positions, self.watermarks.fetch(self.topics), self.policy)
        self._report_skips(result)
        if not result.ranges and result.positions == self.progress.positions:
            return None
        return Batch(self.progress.batch_id + 1, result.ranges, dict(result.positions))

    def _run_batch(self, batch: Batch, *, planned_ahead: bool) -> None:
        started_at = datetime.now(UTC)
        if batch.ranges and not planned_ahead:
            self.store.plan(batch)
        times = self.executor.execute(batch, self.epoch) if batch.ranges else None
        failpoints.phase("after_write", batch.batch_id)
        failpoints.phase("commit", batch.batch_id)
        commit_started = time.perf_counter()
        self.store.commit(batch, started_at)
        commit = time.perf_counter() - commit_started
        failpoints.phase("after_commit", batch.batch_id)
        self.progress.batch_id, self.progress.positions = batch.batch_id, dict(batch.positions)
        self.progress.batches += 1
        self.progress.records += batch.records
        logs.event(
            "batch",
            batch_id=batch.batch_id,
            epoch=self.epoch,
            recovered=planned_ahead,
            ranges=offsets.ranges_json(batch.ranges),
            records=batch.records,
            records_out=times.records_out if times else 0,
            read_s=round(times.read, 4) if times else 0.0,
            transform_s=round(times.transform, 4) if times else 0.0,
            write_s=round(times.write, 4) if times else 0.0,
            commit_s=round(commit, 4),
        )

    def _recoverable(self, planned: Batch | None) -> Batch | None:
        """A batch planned by a previous driver and never committed is re-executed
        exactly as planned, unless retention deleted part of it meanwhile."""
        if planned is None or not planned.ranges:
            return planned
        marks = self.watermarks.fetch(self.topics)
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
            logs.event(
                "skipped records deleted by retention",
                level=30,
                partition=str(skip.tp),
                committed=skip.committed,
                resumed_at=skip.resumed_at,
                skipped=skip.count,
            )
