"""Example transform: one cleaned row per UI event, keyed by ``event_id``.

Target table::

    CREATE TABLE events (event_id text PRIMARY KEY, seq bigint, page text,
        action text, user_id text, event_time timestamp, source_topic text,
        source_partition int, source_offset bigint)

Re-processing an event rewrites the same row, so the table holds each event once.
Malformed records are returned as rejects, with their reason, for the dead-letter
topic (``spec.deadLetter``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame

from sluice_job.examples.ui_events import clean
from sluice_job.transform import TransformResult


def transform(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    del options
    cleaned = clean(records)
    return cleaned.with_output(cleaned.output.drop("batch_id"))
