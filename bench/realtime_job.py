"""The third contender: the same pipeline as a Spark Real-Time Mode query (a child
process).

``python -m bench.realtime_job --config FILE`` reads the pipeline spec Sluice runs and
builds what Spark 4.2's Real-Time Mode accepts for it:

* the session from ``sluice_job.spark.spark_conf`` (the driver's very settings), with
  one task slot per Kafka partition (``local[8]`` for 8 partitions, see
  :func:`task_slots`): with the driver's ``local[2]`` only two partitions are read;
* ``readStream`` from spark-sql-kafka, ``subscribe`` to the topic from ``earliest``,
  ``failOnDataLoss`` and ``includeHeaders`` as Sluice's batch read sets them; no
  ``maxOffsetsPerTrigger``: a real-time batch reads whatever arrives while it runs;
* the spec's transform (``sluice_job.transform.apply``) on the stream, its records
  given a constant ``batch_id`` (a real-time batch is long-running: no transform
  that keys its output by batch can run here, and the events example drops it);
  only its output is written (the benchmark's data has no rejects);
* ``writeStream.foreach``: a ``ForeachWriter`` (:class:`CassandraRows`), the one
  arbitrary sink Real-Time Mode supports (``foreachBatch`` is refused), writing each
  row as it comes with one prepared ``INSERT ... USING TIMESTAMP ?``, at most 64 in
  flight per task, every cell versioned by the task's start on the wall clock;
* ``outputMode("update")`` (the only one Real-Time Mode accepts),
  ``trigger(realTime=...)`` of ``checkpointSeconds`` (at least 5 s: the batch
  duration is a checkpoint interval, not a latency), ``checkpointLocation`` on disk.

What it guarantees after a failure (Spark's docs, "Fault Tolerance"): offsets are
committed at the end of each batch, after its records were written, so a restarted
query re-writes what it wrote since the last batch that ended; this writer's rows
are keyed upserts, so a re-write replaces a row with the same values (at least once,
effectively once per key). Nothing fences a second driver.

Every progress report is appended to the progress file as JSON, as the Structured
Streaming baseline does. SIGTERM stops the query and the session, then the process
exits 0 (1 if the query had failed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from cassandra.cluster import ResponseFuture, Session
from cassandra.query import PreparedStatement
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from bench import baseline_writer, structured_job
from bench.structured_job import destination, epoch_of, on_sigterm_set, stream
from sluice_api.spec import PipelineSpec
from sluice_job import transform
from sluice_job.reader import BATCH_ID_COLUMN
from sluice_job.write_order import next_version, write_version

IN_FLIGHT: Final = baseline_writer.CONCURRENCY
"""Writes in flight per task, as the baseline's ``execute_concurrent`` keeps."""
DEFAULT_CHECKPOINT_SECONDS: Final = 5.0
"""Real-Time Mode's smallest batch duration (``realTimeMode.minBatchDuration``)."""


class CassandraRows:
    """A ``ForeachWriter``: each row is sent as it arrives, at most :data:`IN_FLIGHT`
    per task; ``close`` waits for the rest and raises the first failure (Spark then
    fails the task and the query restarts from its last committed offsets)."""

    def __init__(
        self, target: baseline_writer.Destination, columns: tuple[str, ...], epoch: int
    ) -> None:
        self._target = target
        self._columns = columns
        self._epoch = epoch
        self._session: Session | None = None
        self._statement: PreparedStatement | None = None
        self._version = 0
        self._pending: deque[ResponseFuture] = deque()

    def open(self, partition_id: int, epoch_id: int) -> bool:
        del partition_id, epoch_id
        self._session = baseline_writer.connect(self._target)
        self._statement = baseline_writer.prepared(
            self._session, self._target.insert(self._columns)
        )
        self._version = write_version(next_version(0, time.time()), self._epoch)
        self._pending = deque()
        return True

    def process(self, row: Row) -> None:
        if self._session is None or self._statement is None:
            raise RuntimeError("ForeachWriter.process before open")
        while len(self._pending) >= IN_FLIGHT:
            self._pending.popleft().result()
        values = (*(row[c] for c in self._columns), self._version)
        self._pending.append(self._session.execute_async(self._statement, values))

    def close(self, error: BaseException | None) -> None:
        pending, self._pending = self._pending, deque()
        for future in pending:
            future.result()
        if error is not None:
            raise error


def start(session: SparkSession, config: Mapping[str, Any]) -> StreamingQuery:
    spec = PipelineSpec.model_validate(config["spec"])
    function = transform.load(spec.transform.entrypoint)
    records = stream(session, spec, None).withColumn(BATCH_ID_COLUMN, F.lit(0).cast("long"))
    output = transform.apply(function, records, spec.transform.options).output
    seconds = float(config.get("checkpoint_seconds", DEFAULT_CHECKPOINT_SECONDS))
    rows = CassandraRows(destination(spec), tuple(output.columns), epoch_of(config))
    writer = output.writeStream.foreach(rows)
    # PySpark 4.2's overloads of trigger() do not list realTime, which it takes.
    real_time: Any = writer.outputMode("update")
    query: StreamingQuery = (
        real_time.trigger(realTime=f"{seconds:g} seconds")
        .option("checkpointLocation", str(config["checkpoint_dir"]))
        .queryName(str(config["name"]))
        .start()
    )
    return query


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.realtime_job")
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args(argv)
    config = json.loads(args.config.read_text())
    return structured_job.run(
        config, on_sigterm_set(), start, "real-time mode query", task_slots(config)
    )


def task_slots(config: Mapping[str, Any]) -> dict[str, str]:
    """One task slot per Kafka partition: Real-Time Mode runs one long-running task
    per partition for the whole batch, and a partition without a slot is not read
    ("Best Practices": a 10-partition topic needs at least 10 cores). The slots are
    threads of the one local JVM, not cores: the tasks mostly wait on Kafka."""
    slots = int(config.get("task_slots") or 0)
    return {"spark.master": f"local[{slots}]"} if slots else {}


if __name__ == "__main__":
    sys.exit(main())
