"""Executing one planned batch on Spark: read the exact ranges, transform, write.

One pass over the data in the common case. Nothing is persisted: the sink write is
the Spark job that reads Kafka, runs the transform and writes, and it counts the rows
it wrote. When the transform returns rejects, a second, small job counts them
*concurrently* with the write (Spark runs jobs from two threads at once) and, only
if there are any, a third brings them to the driver for the dead-letter writer.
Without a dead-letter topic any reject fails the batch, so then the rejects are
counted first and the sink is not written at all.

Why not cache the records and count them, as before: at a steady 5k events/s with a
1 s trigger, each batch paid ~1.2 s for two extra sequential jobs (count the cached
records, count the rejects) on top of the write. A batch's fixed cost grows the next
batch, so that cost decided the end-to-end latency (docs/tuning.md). Reading Kafka
twice when a transform returns rejects is cheaper than waiting for the jobs in turn.

Phases, as the metrics report them: ``read`` builds the Kafka read (planning only;
the fetch itself happens inside the jobs), ``transform`` is the user's function
building its frames, ``write`` is the sink job (fetch, transform, write), and
``dead_letter`` waits for the rejects and sends them. Records in are counted from
the planned offset ranges. Rejects go to the dead-letter topic before the runner
commits: a commit never covers a reject that is not durable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from pyspark.sql import DataFrame, Row, SparkSession

from sluice_job import failpoints, reader, transform
from sluice_job.checkpoint import Batch
from sluice_job.deadletter import DeadLetters, Reject
from sluice_job.ports import PhaseTimes
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
    _counter: ThreadPoolExecutor = field(
        init=False, default_factory=lambda: ThreadPoolExecutor(1, "sluice-rejects")
    )

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        failpoints.phase("read", batch.batch_id)
        clock = Stopwatch()
        records = reader.read(self.spark, self.kafka_config, batch.ranges, batch.batch_id)
        read = clock.lap()
        result = transform.apply(self.transform, records, self.options)
        transformed = clock.lap()
        failpoints.phase("write", batch.batch_id)
        counted: Future[int] | None = None
        if result.rejects is not None and self.dead_letters.refuses:
            self._dead_letter(result.rejects, result.rejects.count(), batch.batch_id)
        elif result.rejects is not None:
            counted = self._counter.submit(result.rejects.count)
        try:
            records_out = self._write(result.output, write_version(batch.version, epoch))
        except BaseException:
            if counted is not None:
                wait([counted])  # the write's failure is the one to report
            raise
        rejected = counted.result() if counted is not None else 0
        wrote = clock.lap()
        if result.rejects is not None:
            self._dead_letter(result.rejects, rejected, batch.batch_id)
        dead_lettered = clock.lap()
        return PhaseTimes(
            read=read,
            transform=transformed,
            write=wrote,
            records_out=records_out,
            records_in=batch.records,
            records_rejected=rejected,
            dead_letter=dead_lettered,
        )

    def _dead_letter(self, rejects: DataFrame, count: int, batch_id: int) -> None:
        if count:
            self.dead_letters.write(_rejects(rejects, count), batch_id=batch_id, count=count)

    def _write(self, output: DataFrame, version: int) -> int:
        """Rows written; counted by the sink, or else by one more evaluation."""
        written = self.sink.write(output, version)
        return written if written is not None else output.count()


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
