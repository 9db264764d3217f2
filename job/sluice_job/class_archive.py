"""``python -m sluice_job.class_archive FILE``: a class data sharing archive of the
driver's JVM, made by running a micro-batch's work once in a local session.

Why: a driver that replaces a failed one (no hot standby) starts cold. Its JVM loads
and verifies some 20,000 classes of Spark, one by one, while the pipeline stalls:
on the 2-core development machine the session took 6.1 s to start (Python's imports
included) and the first batch 9.5 s, against 1.2 s for the next. With the classes
mapped from an archive (JDK 17's dynamic CDS, ``-XX:ArchiveClassesAtExit`` once,
``-XX:SharedArchiveFile`` at every start) the session took 3.5 s and the first batch
7.4 s (medians, ``make bench-cold-start``, docs/tuning.md). Classes are code, never
data: the archive holds Spark's and the JDK's, as the image ships them, and nothing
of a pipeline.

The work: the events example's transform (JSON parse, rejects with reasons) and the
KPI example's (windowed aggregation) over a few hundred made-up records in the
Kafka source's columns, each output deduplicated by key and written through
``mapInArrow`` by a Python worker that counts its rows (the sink's shape, sending
nothing), the rejects counted and collected beside it, three rounds. Spark's Kafka
connector comes from ``spark.jars``, a class loader of its own that JDK 17 does not
archive, so its classes still load at the first batch.

The JVM matches the archive to itself when it starts: its own build, the class path
(``pyspark/jars`` and Spark's configuration directory, each jar's size and time), and
the heap's pointer encoding. One that does not match is not used, and the driver's
log says so (``class_archive`` in "spark session started"). So the archive is made
where it is used: the job image makes it at build time (``Dockerfile.job``), and the
local stack once per JDK and PySpark install (``sluice-dev provision``, the
``spark-class-archive`` artifact).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from sluice_api import env as names
from sluice_api.spec import PipelineSpec
from sluice_job import execute, keys, reader, spark
from sluice_job.examples import events, kpi

ROUNDS: Final = 3
RECORDS: Final = 300
EXIT_TIMEOUT: Final = 300.0
"""Seconds the JVM may take to write the archive as it exits."""

TRAINING_SPEC: Final = {
    "image": "sluice/class-archive:training",
    "source": {"kafka": {"bootstrapServers": "127.0.0.1:9092", "topics": ["training"]}},
    "transform": {"entrypoint": "sluice_job.examples.events:transform"},
    "sink": {"cassandra": {"contactPoints": ["127.0.0.1"], "keyspace": "t", "table": "t"}},
    "checkpoint": {"cassandra": {"contactPoints": ["127.0.0.1"], "keyspace": "t"}},
}
"""A pipeline's defaults, so the session is configured as a driver's (nothing here
is reached: the work reads no Kafka and writes no Cassandra)."""


def training_conf(env: Mapping[str, str], python: str, archive: Path) -> dict[str, str]:
    """The driver's session configuration (``spark.spark_conf`` of the default spec),
    with its JVM writing the classes it loaded to ``archive`` as it exits (a pure
    function). An archive named in ``env`` is not used: the JVM cannot map one and
    write another."""
    spec = PipelineSpec.model_validate(TRAINING_SPEC)
    own = {k: v for k, v in env.items() if k != names.SPARK_CLASS_ARCHIVE}
    conf = spark.spark_conf(spec, own, "sluice-class-archive", python)
    options = conf.get("spark.driver.extraJavaOptions", "")
    dump = f"-XX:ArchiveClassesAtExit={archive} -Xlog:cds=error"
    conf["spark.driver.extraJavaOptions"] = f"{options} {dump}".strip()
    return conf


_KAFKA_ROW: Final = Row(*reader.KAFKA_RECORD.fieldNames())


def records(count: int, first: int) -> list[Row]:
    """``count`` records in the Kafka source's columns, one in ten malformed (a pure
    function): the events example rejects those, the rest are UI events."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    millis = int(at.timestamp() * 1000)
    rows = []
    for n in range(first, first + count):
        value = (
            b"{"
            if n % 10 == 9
            else (
                f'{{"event_id": "e-{n}", "seq": {n}, "page": "/p/{n % 7}", '
                f'"action": "CLICK", "user_id": "u-{n % 13}", "ts": {millis + n * 250}}}'
            ).encode()
        )
        rows.append(_KAFKA_ROW(f"k-{n}".encode(), value, "training", n % 3, n, at, 0, None))
    return rows


def counted(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: the rows of the partition, counted (the Cassandra
    sink's shape, ``sinks.cassandra_writer.write_arrow``, without a session)."""
    written = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pydict({"written": pa.array([written], pa.int64())})


def _frame(session: SparkSession, batch_id: int) -> DataFrame:
    frame = session.createDataFrame(records(RECORDS, batch_id * RECORDS), reader.KAFKA_RECORD)
    frame = frame.withColumn(reader.BATCH_ID_COLUMN, F.lit(batch_id).cast("long"))
    return frame.withColumn(keys.POSITION, keys.position())


_TRANSFORMS: Final = (
    (events.transform, ("event_id",)),
    (kpi.transform, ("page", "window_start", "batch_id")),
)


def _round(session: SparkSession, batch_id: int) -> None:
    for transform, key in _TRANSFORMS:
        result = transform(_frame(session, batch_id), {})
        deduplicated = keys.last_per_key(result.output, key)
        written = deduplicated.mapInArrow(counted, "written long").agg(F.sum("written")).head()
        if written is None:
            raise RuntimeError("the training write returned no count")
        if result.rejects is not None:
            rejects = execute.cut(result.rejects, 1_000_000)
            count, _ = execute.measure(rejects)
            if count:
                rejects.collect()


def make(archive: Path, env: Mapping[str, str] = os.environ) -> float:
    """Write the archive (atomically: a partial file is renamed once the JVM exited
    having written it); returns the seconds it took. Raises ``RuntimeError`` when the
    JVM wrote none (a JDK without its base archive, which the dynamic one extends)."""
    began = time.monotonic()
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    conf = training_conf(env, sys.executable, partial)
    # Local work only: a build container's host name may not resolve, which Spark's
    # configuration asks for before anything else.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    session = spark.session(conf)
    for batch_id in range(1, ROUNDS + 1):
        _round(session, batch_id)
    process = spark.jvm_process(session)
    session.stop()
    if process is None or process.stdin is None:
        raise RuntimeError("Spark's JVM was not launched by this process")
    # PySpark's gateway JVM exits when its standard input closes, and writes the
    # archive as it does.
    process.stdin.close()
    code = process.wait(timeout=EXIT_TIMEOUT)
    if code != 0 or not partial.is_file():
        raise RuntimeError(
            f"Spark's JVM exited {code} without writing a class archive to {partial}: "
            "does the JDK have its base archive (lib/server/classes.jsa)?"
        )
    partial.chmod(0o444)
    os.replace(partial, archive)
    return time.monotonic() - began


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice_job.class_archive")
    parser.add_argument("archive", type=Path, help="the archive to write")
    args = parser.parse_args(argv)
    archive: Path = args.archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    try:
        seconds = make(archive)
    except RuntimeError as err:
        print(f"class archive: {err}", file=sys.stderr)
        return 1
    size = archive.stat().st_size / 2**20
    print(f"class archive: {archive} ({size:.0f} MiB) in {seconds:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
