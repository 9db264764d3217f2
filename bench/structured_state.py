"""``python -m bench.structured_state``: Structured Streaming's own stateful operators
as contenders of ``bench.state`` (issue 41's comparison), run as a child process on
the same topic, Cassandra and sink tables as Sluice's contenders.

* ``--mode dedup``: the KPI example over ``dropDuplicatesWithinWatermark("event_id")``
  (watermark delay one day, the de-duplication example's horizon), its partial rows
  written per micro-batch by ``foreachBatch`` through Sluice's own Cassandra sink
  (there is no Spark Cassandra Connector for Spark 4);
* ``--mode visitors``: ``approx_count_distinct(user_id)`` per page and 60-second
  window, watermark 5 s, output mode ``append`` (each window written once, when the
  watermark passes it), written the same way. Structured Streaming has no exact
  distinct count on a stream ("distinct aggregations are not supported").

Both read ``startingOffsets=earliest`` with ``trigger(availableNow=True)`` and
``maxOffsetsPerTrigger`` set to Sluice's batch (records per partition times
partitions), so the backlog drains in batches of the same size. The state lives in
the query's checkpoint directory (the default HDFS-backed state store on local
disk). Each micro-batch's progress is printed as one JSON line in the shape of the
driver's ``batch`` event (``records``, ``batch_s``, ``write_s``), which
``bench.state_figures`` reads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_api import env as env_names
from sluice_job.examples import kpi
from sluice_job.examples.ui_events import clean
from sluice_job.sinks.cassandra import CassandraSink, CassandraTarget
from sluice_job.write_order import write_version

WINDOW_S: Final = 60
DEDUP_HORIZON: Final = "1 day"
LATENESS: Final = "5 seconds"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.structured_state", description=__doc__)
    parser.add_argument("--mode", choices=("dedup", "visitors"), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--contact", required=True)
    parser.add_argument("--keyspace", required=True)
    parser.add_argument("--per-trigger", type=int, required=True)
    parser.add_argument("--checkpoint", required=True)
    return parser.parse_args(argv)


def session() -> SparkSession:
    jars = os.environ.get(env_names.SPARK_JARS, "")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import sluice_job
    return (
        SparkSession.builder.master("local[2]")
        .appName("bench-structured-state")
        .config("spark.jars", jars)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )


def query(spark: SparkSession, args: argparse.Namespace) -> Any:
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.per_trigger)
        .load()
    )
    events = clean(source.withColumn("batch_id", F.lit(0).cast("long"))).output
    if args.mode == "dedup":
        table = "page_kpis"
        watermarked = events.withWatermark("event_time", DEDUP_HORIZON)
        stream = watermarked.dropDuplicatesWithinWatermark(["event_id"])
    else:
        table = "page_visitors"
        stream = (
            events.withWatermark("event_time", LATENESS)
            .groupBy(F.window("event_time", f"{WINDOW_S} seconds"), "page")
            .agg(F.approx_count_distinct("user_id").alias("visitors"))
            .select("page", F.col("window.start").alias("window_start"), "visitors")
        )
    sink = CassandraSink(CassandraTarget((args.contact,), args.keyspace, table, None))

    def write(frame: DataFrame, batch_id: int) -> None:
        if args.mode == "dedup":
            frame = kpi.kpis(frame.withColumn("batch_id", F.lit(batch_id)), WINDOW_S)
        sink.write(frame, write_version(batch_id + 1, 1))

    writer = stream.writeStream.foreachBatch(write).option("checkpointLocation", args.checkpoint)
    if args.mode == "visitors":
        writer = writer.outputMode("append")
    return writer.trigger(availableNow=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    spark = session()
    running = query(spark, args)
    running.awaitTermination()
    for progress in running.recentProgress:
        durations = progress.get("durationMs", {})
        print(
            json.dumps(
                {
                    "event": "batch",
                    "batch_id": progress["batchId"],
                    "records": progress["numInputRows"],
                    "batch_s": durations.get("triggerExecution", 0) / 1000,
                    "write_s": durations.get("addBatch", 0) / 1000,
                }
            ),
            flush=True,
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
