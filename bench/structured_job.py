"""The baseline: the same pipeline as Spark Structured Streaming (a child process).

``python -m bench.structured_job --config FILE`` reads the pipeline spec Sluice runs
and builds the idiomatic Structured Streaming job for it:

* the session from ``sluice_job.spark.spark_conf`` (the driver's very settings);
* ``readStream`` from spark-sql-kafka, ``subscribe`` to the topic from ``earliest``,
  ``maxOffsetsPerTrigger`` = the per-partition cap times the partitions,
  ``failOnDataLoss`` and ``includeHeaders`` as Sluice's batch read sets them;
* ``foreachBatch``: the spec's transform (``sluice_job.transform.apply``) and its
  output written by the writer a user writes (``bench.baseline_writer``: per
  partition, one prepared INSERT per row, 64 in flight, not Sluice's sink), every cell
  ``USING TIMESTAMP`` the write version of the batch's start on the wall clock, as
  Sluice's driver versions its batches;
* ``checkpointLocation`` on local disk; trigger every ``trigger.intervalSeconds``
  (0: as fast as possible).

The baseline does what a user of Structured Streaming writes, no more: it does not
count records or evaluate rejects (the benchmark's data has none). Every progress
report is appended to the progress file as JSON. SIGTERM stops the query and the
session, then the process exits 0 (1 if the query had failed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)
from pyspark.sql.streaming.query import StreamingQuery

from bench import baseline_writer
from sluice_api.spec import PipelineSpec
from sluice_job import spark, transform
from sluice_job.reader import BATCH_ID_COLUMN
from sluice_job.write_order import next_version, write_version

EPOCH = 1
"""The baseline's write versions use epoch 1, as the benchmark's Sluice driver does
(``epoch`` in the config after a restart), and the batch's start on the wall clock,
as the driver's plan does."""


class ProgressFile(StreamingQueryListener):
    """Appends every progress report to a JSON-lines file, flushed at once."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def write(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(event) + "\n")
            self._out.flush()

    def onQueryStarted(self, event: QueryStartedEvent) -> None:  # noqa: N802
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:  # noqa: N802
        self.write({"event": "progress", "progress": json.loads(event.progress.json)})

    def onQueryIdle(self, event: QueryIdleEvent) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:  # noqa: N802
        self.write({"event": "terminated", "exception": event.exception})


def stream(session: SparkSession, spec: PipelineSpec, max_offsets: int | None) -> DataFrame:
    """The Kafka stream of the spec's topics; ``max_offsets`` caps a trigger
    (``None``: no cap, as a real-time batch reads whatever arrives while it runs)."""
    source = spec.kafka
    reader = (
        session.readStream.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", ",".join(source.topics))
        .option("startingOffsets", source.starting_offsets.value)
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
    )
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()


def epoch_of(config: Mapping[str, Any]) -> int:
    """The epoch the query's write versions carry: 1, or a restart's (``epoch``)."""
    return int(config.get("epoch", EPOCH))


def destination(spec: PipelineSpec) -> baseline_writer.Destination:
    target = spec.sink.cassandra
    if target is None:
        raise ValueError("the benchmark's spec must have sink.cassandra")
    return baseline_writer.Destination(tuple(target.contact_points), target.keyspace, target.table)


def start(session: SparkSession, config: Mapping[str, Any]) -> StreamingQuery:
    spec = PipelineSpec.model_validate(config["spec"])
    function = transform.load(spec.transform.entrypoint)
    options = spec.transform.options
    target = destination(spec)
    epoch = epoch_of(config)

    def write_batch(frame: DataFrame, batch_id: int) -> None:
        records = frame.withColumn(BATCH_ID_COLUMN, F.lit(batch_id).cast("long"))
        result = transform.apply(function, records, options)
        version = write_version(next_version(0, time.time()), epoch)
        baseline_writer.write(result.output, target, version)

    query = (
        stream(session, spec, int(config["max_offsets_per_trigger"]))
        .writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", str(config["checkpoint_dir"]))
        .queryName(str(config["name"]))
    )
    interval = spec.trigger.interval_seconds
    if interval > 0:
        query = query.trigger(processingTime=f"{interval} seconds")
    return query.start()


def watch(query: StreamingQuery, stop: threading.Event) -> Exception | None:
    """Until SIGTERM or the query's end; the query's failure, if it failed."""
    try:
        while not stop.is_set() and query.isActive:
            query.awaitTermination(1)
    except StreamingQueryException as err:
        return err
    finally:
        query.stop()
    return None


Start = Callable[[SparkSession, Mapping[str, Any]], StreamingQuery]


def run(
    config: Mapping[str, Any],
    stop: threading.Event,
    start_query: Start | None = None,
    what: str = "structured streaming query",
    conf_extra: Mapping[str, str] | None = None,
) -> int:
    """Runs the query ``start_query`` starts (this module's :func:`start` by default)
    until SIGTERM or its end, its progress reports appended to the progress file;
    ``conf_extra`` overrides the driver's Spark settings."""
    begin = start_query or start
    spec = PipelineSpec.model_validate(config["spec"])
    conf = spark.spark_conf(spec, os.environ, str(config["name"]), sys.executable)
    session = spark.session({**conf, **(conf_extra or {})})
    with Path(config["progress_file"]).open("a") as out:
        listener = ProgressFile(out)
        session.streams.addListener(listener)
        try:
            query = begin(session, config)
            listener.write({"event": "started", "id": str(query.id)})
            failure = watch(query, stop)
        finally:
            session.stop()
    if failure is not None:
        print(f"{what} failed: {failure}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.structured_job")
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args(argv)
    config = json.loads(args.config.read_text())
    return run(config, on_sigterm_set())


def on_sigterm_set() -> threading.Event:
    """An event that SIGTERM sets (the query then stops and the process exits)."""
    stop = threading.Event()

    def on_sigterm(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    return stop


if __name__ == "__main__":
    sys.exit(main())
