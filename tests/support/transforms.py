"""Transforms used by the tests: the example's cleaned events, tagged with the
``tag`` option so a test can tell which driver (or code version) wrote a row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job.examples.ui_events import clean

EVENTS_TABLE = """CREATE TABLE {keyspace}.events (event_id text PRIMARY KEY, seq bigint,
    page text, action text, user_id text, event_time timestamp, source_topic text,
    source_partition int, source_offset bigint, tag text)"""


def tagged(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
    return clean(records).drop("batch_id").withColumn("tag", F.lit(str(options["tag"])))


def tagged_v2(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
    """A second code version: actions upper-cased, so its rows differ visibly."""
    return tagged(records, options).withColumn("action", F.upper(F.col("action")))
