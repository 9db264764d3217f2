"""Executing one planned batch on Spark: read the exact ranges, transform, write.

Caching, kept to what pays for itself (measured, see docs/tuning.md):

* the batch's records are persisted: they feed both the transform's rejects and its
  output, so Kafka is read once per batch, and their count times the read phase on
  its own (a slow broker shows in the read histogram, not the sink's);
* rejects, when the transform returns them, are persisted: they are counted, then
  handed to the dead-letter writer, and they are few;
* the output is not persisted: it is evaluated once, by the sink write, which also
  counts it (a sink that does not count costs one more evaluation for the count).

Spark evaluates lazily, so the transform's work happens where its results are
first used: in the transform phase for rejects, in the write phase for the output.
Everything persisted is released when the batch ends, whatever happens. Rejects
go to the dead-letter writer before the sink write, both before the runner
commits: a commit never covers a reject that is not durable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row, SparkSession

from sluice_job import failpoints, reader, transform
from sluice_job.checkpoint import Batch
from sluice_job.deadletter import DeadLetters, Reject
from sluice_job.runner import PhaseTimes
from sluice_job.transform import TransformFn
from sluice_job.write_order import write_version

COLLECT_LIMIT: Final = 50_000
"""Rejects of a batch up to this many reach the driver in one piece; more come
partition by partition, so a batch of only rejects cannot exhaust its memory."""


class Sink(Protocol):
    def write(self, frame: DataFrame, version: int) -> int | None:
        """Write ``frame`` idempotently; returns the rows written, if it counts them."""


@dataclass
class Stopwatch:
    last: float = field(default_factory=time.perf_counter)

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self.last = now - self.last, now
        return elapsed


@dataclass
class SparkExecutor:
    spark: SparkSession
    kafka_config: Mapping[str, str]
    transform: TransformFn
    options: Mapping[str, Any]
    sink: Sink
    dead_letters: DeadLetters

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        failpoints.phase("read", batch.batch_id)
        clock = Stopwatch()
        records = reader.read(self.spark, self.kafka_config, batch.ranges, batch.batch_id)
        records = records.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            records_in = records.count()
            read = clock.lap()
            result = transform.apply(self.transform, records, self.options)
            rejects = _persisted(result.rejects)
            try:
                rejected = rejects.count() if rejects is not None else 0
                transformed = clock.lap()
                failpoints.phase("write", batch.batch_id)
                self._dead_letter(rejects, rejected, batch.batch_id)
                dead_lettered = clock.lap()
                records_out = self._write(result.output, batch.batch_id, epoch)
                wrote = clock.lap()
            finally:
                if rejects is not None:
                    rejects.unpersist()
        finally:
            records.unpersist()
        return PhaseTimes(
            read=read,
            transform=transformed,
            write=wrote,
            records_out=records_out,
            records_in=records_in,
            records_rejected=rejected,
            dead_letter=dead_lettered,
        )

    def _dead_letter(self, rejects: DataFrame | None, count: int, batch_id: int) -> None:
        if rejects is not None and count:
            self.dead_letters.write(_rejects(rejects, count), batch_id=batch_id, count=count)

    def _write(self, output: DataFrame, batch_id: int, epoch: int) -> int:
        """Rows written; counted by the sink, or else by one more evaluation."""
        written = self.sink.write(output, write_version(batch_id, epoch))
        return written if written is not None else output.count()


def _persisted(frame: DataFrame | None) -> DataFrame | None:
    return None if frame is None else frame.persist(StorageLevel.MEMORY_AND_DISK)


def _rejects(rejects: DataFrame, count: int) -> Iterator[Reject]:
    rows = (
        rejects.collect()
        if count <= COLLECT_LIMIT
        else rejects.toLocalIterator(prefetchPartitions=True)
    )
    return (_reject(row) for row in rows)


def _reject(row: Row) -> Reject:
    return Reject(
        key=_bytes(row["key"]),
        value=_bytes(row["value"]),
        topic=str(row["topic"]),
        partition=int(row["partition"]),
        offset=int(row["offset"]),
        reason=str(row["reason"]),
    )


def _bytes(value: bytes | bytearray | None) -> bytes | None:
    return None if value is None else bytes(value)
