"""Parsing and cleaning UI interaction events, shared by the example transforms.

An event is a JSON object like::

    {"event_id": "e-17", "seq": 17, "page": "/Home/?ref=x", "action": "CLICK",
     "user_id": "u-3", "ts": 1763780400123}

Cleaning drops records that are not JSON objects or lack a field, and normalises:
page lower-cased without query string or trailing slash, action lower-cased, ``ts``
(milliseconds since the epoch) turned into a UTC timestamp.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

EVENT = StructType(
    [
        StructField("event_id", StringType()),
        StructField("seq", LongType()),
        StructField("page", StringType()),
        StructField("action", StringType()),
        StructField("user_id", StringType()),
        StructField("ts", LongType()),
    ]
)
REQUIRED = ("event_id", "page", "action", "ts")


def normalised_page(page: Column) -> Column:
    without_query = F.regexp_replace(F.lower(F.trim(page)), r"[?#].*$", "")
    stripped = F.regexp_replace(without_query, r"/+$", "")
    return F.when(stripped == "", F.lit("/")).otherwise(stripped)


def clean(records: DataFrame) -> DataFrame:
    """Valid events with their source position; malformed records are dropped."""
    parsed = records.select(
        F.from_json(F.col("value").cast("string"), EVENT).alias("e"),
        "topic",
        "partition",
        "offset",
        "batch_id",
    )
    valid = parsed.where(F.col("e").isNotNull())
    for name in REQUIRED:
        valid = valid.where(F.col(f"e.{name}").isNotNull())
    return valid.select(
        F.col("e.event_id").alias("event_id"),
        F.col("e.seq").alias("seq"),
        normalised_page(F.col("e.page")).alias("page"),
        F.lower(F.trim(F.col("e.action"))).alias("action"),
        F.col("e.user_id").alias("user_id"),
        F.timestamp_millis(F.col("e.ts")).alias("event_time"),
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        "batch_id",
    )
