"""Example transform: KPIs per page per time window (views, clicks, events).

Each batch writes its own partial row per (page, window) keyed by ``batch_id``;
the KPI of a window is the sum of its rows. Batches are write-ahead planned, so a
batch id always covers the same records and a re-run rewrites the same rows: the
key is deterministic and the sum never counts a record twice. Target table::

    CREATE TABLE page_kpis (page text, window_start timestamp, batch_id bigint,
        views bigint, clicks bigint, events bigint,
        PRIMARY KEY ((page, window_start), batch_id))

    SELECT sum(views), sum(clicks) FROM page_kpis WHERE page = ? AND window_start = ?

Options: ``windowSeconds`` (default 60). Malformed records are returned as rejects
for the dead-letter topic; they count in no KPI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job.examples.ui_events import clean
from sluice_job.transform import TransformResult


def transform(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    cleaned = clean(records)
    return cleaned.with_output(kpis(cleaned.output, window_seconds(options)))


def window_seconds(options: Mapping[str, Any]) -> int:
    window = int(options.get("windowSeconds", 60))
    if window <= 0:
        raise ValueError("transform.options.windowSeconds must be positive")
    return window


def kpis(events: DataFrame, window: int) -> DataFrame:
    """The batch's partial KPI rows of ``events`` (cleaned): one per page, window and
    batch."""
    seconds = F.unix_seconds(F.col("event_time"))
    start = F.timestamp_seconds(seconds - seconds % F.lit(window))
    return (
        events.withColumn("window_start", start)
        .groupBy("page", "window_start", "batch_id")
        .agg(
            F.sum(F.when(F.col("action") == "view", 1).otherwise(0)).alias("views"),
            F.sum(F.when(F.col("action") == "click", 1).otherwise(0)).alias("clicks"),
            F.count(F.lit(1)).alias("events"),
        )
    )
