"""The Spark batch read of exactly the planned offset ranges.

The data path stays in the JVM: Spark's Kafka source (spark-sql-kafka) reads
``[start, end)`` per partition, given as ``startingOffsets``/``endingOffsets`` JSON.
``failOnDataLoss`` stays on, so a range that Kafka no longer holds fails the batch
instead of silently shrinking it. The consumer reads with ``isolation.level``
``read_committed``: records of aborted transactions (and transaction markers) inside
a range are skipped, never handed to the transform; the planner never plans past the
last stable offset, so no range reaches into an open transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_job import keys, offsets
from sluice_job.offsets import OffsetRange

BATCH_ID_COLUMN = "batch_id"


def read_options(ranges: Sequence[OffsetRange]) -> dict[str, str]:
    """The Kafka source options selecting exactly ``ranges`` (a pure function)."""
    assign: dict[str, list[int]] = {}
    for item in sorted(ranges, key=lambda r: r.tp):
        assign.setdefault(item.tp.topic, []).append(item.tp.partition)
    return {
        "assign": json.dumps(assign),
        "startingOffsets": json.dumps(offsets.to_json({r.tp: r.start for r in ranges})),
        "endingOffsets": json.dumps(offsets.to_json({r.tp: r.end for r in ranges})),
        "failOnDataLoss": "true",
        "includeHeaders": "true",
        "kafka.isolation.level": "read_committed",
    }


def read(
    spark: SparkSession,
    client_config: Mapping[str, str],
    ranges: Sequence[OffsetRange],
    batch_id: int,
) -> DataFrame:
    """Records of ``ranges`` with Kafka's columns (key, value, topic, partition,
    offset, timestamp, timestampType, headers) plus the ``batch_id`` and the source
    position (``keys.POSITION``)."""
    reader = spark.read.format("kafka")
    for key, value in client_config.items():
        reader = reader.option(f"kafka.{key}", value)
    for key, value in read_options(ranges).items():
        reader = reader.option(key, value)
    records = reader.load().withColumn(BATCH_ID_COLUMN, F.lit(batch_id).cast("long"))
    return records.withColumn(keys.POSITION, keys.position())
