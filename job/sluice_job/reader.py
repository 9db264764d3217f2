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
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluice_job import keys, offsets
from sluice_job.offsets import OffsetRange

BATCH_ID_COLUMN = "batch_id"
KAFKA_RECORD: Final = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)
"""The columns of Spark's Kafka source, which the driver reads records with (before
``batch_id`` and the source position)."""


FETCH_MAX_WAIT_MS: Final = "10"
"""How long the broker may hold a fetch that found no new data (Kafka's default is
500 ms). A batch reads ranges that Kafka already holds, so such a wait is never for
data the batch needs: it is the consumer's fetch past the range's last record, which
the broker holds because the range ends at the log's end, as every batch of a pipeline
that keeps up does. With the default each Spark task of such a batch sat out up to
500 ms: an 800-record read took 2.4 s instead of 0.4 s (``bench/phases.py``)."""


def client_config(kafka: Mapping[str, str], group: str) -> dict[str, str]:
    """The Kafka client settings of every batch read: ``kafka`` with ``group`` as the
    consumers' ``group.id`` and, unless ``kafka`` sets it, a short
    ``fetch.max.wait.ms`` (:data:`FETCH_MAX_WAIT_MS`).

    Spark's Kafka connector keeps its executor consumers (and the records they fetched
    ahead) in a pool keyed by group id and partition. Without a group id it makes up a
    new one for every read, so every batch opened a new consumer per partition, twice
    when the rejects are counted beside the write. One id per pipeline lets every
    batch take the consumers the previous one left. It is only a name: the consumers
    are assigned their partitions, never join the group and never commit."""
    return {"fetch.max.wait.ms": FETCH_MAX_WAIT_MS, **kafka, "group.id": group}


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
