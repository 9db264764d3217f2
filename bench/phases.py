"""Where a batch's time goes: the sink job's stages measured one at a time.

The benchmark's per-batch figures show the ``write`` phase (one Spark job: fetch from
Kafka, transform, rank by key, hand the rows to Python, write) as almost all of a
batch. This profile splits that job: each step below is a Spark job on the same
offset ranges of one topic, each one stage longer than the one before, so the
difference between two steps is what the added stage costs:

* ``read``: Kafka's records into the JVM (``sluice_job.reader.read``), counted;
* ``transform``: the events transform's output, counted;
* ``rank``: the sink's one-row-per-key shuffle (``sluice_job.keys.last_per_key``);
* ``arrow``: the ranked rows handed to Python as Arrow batches (``mapInArrow``) and
  counted there; ``pickled`` does the same through ``rdd.mapPartitions`` over
  ``Row``s (how the sink took its rows before);
* ``write``: the sink's whole write (``CassandraSink.write``);
* ``rejects``: the rejects' count alone, the job the driver runs beside the write;
* ``write+rejects``: both at once, as the driver runs them.

What a batch could shed (the levers of a low-latency batch), each against ``write``:

* ``job``: a Spark job that does nothing (one row counted), the floor of any job;
* ``write-unranked``: the write without the one-row-per-key shuffle (the output
  without its source position);
* ``write-coalesced``: the write with the read in one task per core instead of one
  per Kafka partition;
* ``write-lean``: both;
* ``write-single``: the whole batch in one task, whose one-row-per-key needs no
  shuffle (a single partition is already clustered by any key), exact as ``write``:
  the batch of ``trigger.mode: LowLatency`` (``sluice_job.one_task``).

The one-task batch split the same way, each step one stage longer than the one
before: ``read-single``, ``transform-single``, ``rank-single``, ``arrow-single``,
``dry-single`` (the sink's write with every row bound to its statement and grouped,
nothing sent: ``CassandraSink.write(dry=True)``), then ``write-single``.

Every step runs ``--repeats`` times (median shown, all runs listed) on a fresh read,
alternating between the first and the second half of each partition so that neither
Spark nor Kafka answers from a cache of the run before; the second half ends at the
log's end, as a live pipeline's batches do. The reads use the driver's Kafka client
settings (``sluice_job.reader.client_config``); ``--kafka KEY=VALUE`` overrides one,
e.g. ``fetch.max.wait.ms=500`` (Kafka's default) to see what it cost. The first
repeat also warms the JVM, the Python workers and their Cassandra sessions up; the
median leaves it out for 3 or more.

``python -m bench.phases --records-per-partition 5000 [--steps read write]`` (Kafka
and Cassandra are started if down, and left running); it produces its own topic and
keyspace and deletes both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.fixtures import (
    BOOTSTRAP,
    CONTACT,
    Names,
    Topics,
    cassandra_session,
    create_keyspace,
    drop_keyspace,
    ensure_stack,
)
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_job import keys, reader
from sluice_job.examples.events import transform
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_job.sinks.cassandra import CassandraSink, CassandraTarget
from sluice_job.watermarks import WatermarkReader

TABLE: Final = "phases"
KEY: Final = ("event_id",)
GROUP: Final = "sluice.bench.phases"
CORES: Final = 2
"""The session's task slots (``local[2]``, a 2-core driver)."""
Step = Callable[[DataFrame], int]


@dataclass(frozen=True)
class Result:
    step: str
    seconds: list[float]
    rows: int

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _count_arrow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pydict({"rows": pa.array([rows], pa.int64())})


def _ranked(frame: DataFrame) -> DataFrame:
    output = transform(frame, {}).output
    return keys.last_per_key(output, KEY).select(*keys.without_position(output.columns))


def steps(sink: CassandraSink) -> dict[str, Step]:
    def arrow(frame: DataFrame) -> int:
        counted = _ranked(frame).mapInArrow(_count_arrow, "rows long")
        return int(counted.agg(F.sum("rows")).head()[0])  # type: ignore[index]

    def pickled(frame: DataFrame) -> int:
        return int(_ranked(frame).rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).sum())

    def write(frame: DataFrame) -> int:
        return sink.write(transform(frame, {}).output, 1)

    def both(frame: DataFrame) -> int:
        result = transform(frame, {})
        assert result.rejects is not None
        with ThreadPoolExecutor(1) as pool:
            rejects = pool.submit(result.rejects.count)
            written = sink.write(result.output, 1)
            rejects.result()
        return written

    def rejects(frame: DataFrame) -> int:
        found = transform(frame, {}).rejects
        return found.count() if found is not None else 0

    def unranked(frame: DataFrame) -> int:
        return sink.write(transform(frame, {}).output.drop(keys.POSITION), 1)

    def coalesced(frame: DataFrame) -> int:
        return sink.write(transform(frame.coalesce(CORES), {}).output, 1)

    def single(frame: DataFrame) -> int:
        return sink.write(transform(frame.coalesce(1), {}).output, 1)

    def arrow_single(frame: DataFrame) -> int:
        counted = _ranked(frame.coalesce(1)).mapInArrow(_count_arrow, "rows long")
        return int(counted.agg(F.sum("rows")).head()[0])  # type: ignore[index]

    def dry_single(frame: DataFrame) -> int:
        return sink.write(transform(frame.coalesce(1), {}).output, 1, dry=True)

    def lean(frame: DataFrame) -> int:
        return sink.write(transform(frame.coalesce(CORES), {}).output.drop(keys.POSITION), 1)

    return {
        "read": lambda frame: frame.count(),
        "transform": lambda frame: transform(frame, {}).output.count(),
        "rank": lambda frame: _ranked(frame).count(),
        "arrow": arrow,
        "pickled": pickled,
        "write": write,
        "rejects": rejects,
        "write+rejects": both,
        "job": lambda frame: frame.sparkSession.range(1).count(),
        "write-unranked": unranked,
        "write-coalesced": coalesced,
        "write-lean": lean,
        "write-single": single,
        "read-single": lambda frame: frame.coalesce(1).count(),
        "transform-single": lambda frame: transform(frame.coalesce(1), {}).output.count(),
        "rank-single": lambda frame: _ranked(frame.coalesce(1)).count(),
        "arrow-single": arrow_single,
        "dry-single": dry_single,
    }


def session(jars: str) -> SparkSession:
    """A session configured as the driver's for a 2-core pod (local[2], 2 shuffle
    partitions, Python workers reused)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(f"local[{CORES}]")
        .appName("sluice-bench-phases")
        .config("spark.jars", jars)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )


def measure(
    spark: SparkSession,
    topic: str,
    ends: Sequence[int],
    repeats: int,
    sink: CassandraSink,
    kafka: dict[str, str],
    only: Sequence[str] = (),
) -> Iterator[Result]:
    def frame(run: int) -> DataFrame:
        ranges = [
            OffsetRange(TopicPartition(topic, p), *halves(end)[run % 2])
            for p, end in enumerate(ends)
        ]
        return reader.read(spark, kafka, ranges, run)

    run = 0
    for name, step in steps(sink).items():
        if only and name not in only:
            continue
        seconds, rows = [], 0
        for _ in range(repeats):
            records = frame(run)
            run += 1
            began = time.perf_counter()
            rows = step(records)
            seconds.append(time.perf_counter() - began)
        yield Result(name, seconds, rows)


def halves(end: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """A partition's offsets ``0 .. end`` cut in two ranges."""
    return (0, end // 2), (end // 2, end)


def partition_ends(topic: str) -> list[int]:
    """Each partition's end offset (records are spread by key, not evenly), read as
    the driver reads them."""
    marks = WatermarkReader({"bootstrap.servers": BOOTSTRAP}).fetch([topic])
    return [marks[tp].high for tp in sorted(marks)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.phases", description=__doc__)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records-per-partition", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--kafka",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="Kafka client settings of the reads over the driver's own "
        "(e.g. fetch.max.wait.ms=500, Kafka's default)",
    )
    parser.add_argument(
        "--steps", nargs="*", default=[], help="run only these steps (default: all)"
    )
    args = parser.parse_args(argv)
    layout = Layout.from_env()
    jars = ensure_stack(layout, say=print)
    names = Names.fresh()
    topics = Topics(BOOTSTRAP)
    topic = topics.create(names.topic("phases"), args.partitions)
    produce(
        BOOTSTRAP, topic, 2 * args.partitions * args.records_per_partition, factory=EventFactory()
    )
    overrides = dict(setting.split("=", 1) for setting in args.kafka)
    kafka = reader.client_config({"bootstrap.servers": BOOTSTRAP, **overrides}, GROUP)
    spark = session(jars)
    try:
        with cassandra_session(CONTACT) as store:
            create_keyspace(store, names.keyspace, [TABLE])
            try:
                sink = CassandraSink(CassandraTarget((CONTACT,), names.keyspace, TABLE, None))
                print(
                    f"{args.partitions} partitions x {args.records_per_partition:,} records, "
                    f"median of {args.repeats} (all runs in brackets)"
                )
                for result in measure(
                    spark,
                    topic,
                    partition_ends(topic),
                    args.repeats,
                    sink,
                    kafka,
                    args.steps,
                ):
                    runs = ", ".join(f"{s:.2f}" for s in result.seconds)
                    print(
                        f"{result.step:14s} {result.median:6.2f} s  [{runs}]  rows {result.rows:,}"
                    )
            finally:
                drop_keyspace(store, names.keyspace)
    finally:
        spark.stop()
        topics.delete_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
