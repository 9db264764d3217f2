"""Example stateful transform: unique visitors per page per window, exact, each
window's row written once, when the event-time watermark passes its end.

Distinct counts cannot be summed from partial rows per batch (the KPI example's
trick): a user seen in two batches would count twice. This transform keeps each open
window's set of users as keyed state (a window state, docs/stateful.md), adds each
batch's users to it, and writes a window's count when it is final. Records behind
the watermark are rejects (``late: DeadLetter``) naming their event time. Declared
as::

    eventTime: {allowedLatenessSeconds: 60}
    state:
      - name: visitors
        table: page_window_visitors
        key: [{name: page, type: text}, {name: window_start, type: timestamp}]
        columns: [{name: users, type: set<text>}]
        window: {start: window_start, sizeSeconds: 60}

Sink table (``examples/visitors-schema.cql``)::

    CREATE TABLE page_visitors (page text, window_start timestamp, visitors int,
        views bigint, PRIMARY KEY ((page), window_start))

Version 2 (:func:`transform_v2`) also counts the window's views: its state adds
``{name: views, type: bigint}``, and its output the ``views`` column. Windows that
version 1 opened read ``views`` as null and count the views version 2 saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job import event_time, windows
from sluice_job.examples.ui_events import clean
from sluice_job.state import States
from sluice_job.transform import REJECT_COLUMNS, TransformResult

STATE = "visitors"
EVENT_TIME = "sluice_event_time"


def transform(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _visitors(records, state, views=False)


def transform_v2(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _visitors(records, state, views=True)


def _visitors(records: DataFrame, state: States, *, views: bool) -> TransformResult:
    # Set the late records apart first, by the event time in their JSON, so that they
    # go to the dead-letter topic as they were read; the others are cleaned as the
    # KPI example cleans them (malformed ones are rejects with their reason).
    ts = F.get_json_object(F.col("value").cast("string"), "$.ts").cast("long")
    stamped = records.withColumn(EVENT_TIME, F.timestamp_millis(ts))
    parts = event_time.split(stamped, EVENT_TIME, state)
    cleaned = clean(parts.on_time.drop(EVENT_TIME))
    visitors = state[STATE]
    values = [F.collect_set("user_id").alias("users")]
    merge = {"users": windows.UNION}
    if views:
        values.append(F.sum(F.when(F.col("action") == "view", 1).otherwise(0)).alias("views"))
        merge["views"] = windows.SUM
    partial_rows = (
        windows.assign(cleaned.output, "event_time", visitors)
        .groupBy("page", "window_start")
        .agg(*values)
    )
    closed = windows.close(partial_rows, visitors, parts.times, merge)
    output = closed.final.select(
        "page",
        "window_start",
        F.size("users").alias("visitors"),
        *([F.col("views")] if views else []),
    )
    rejects = cleaned.rejects
    if parts.late is not None:
        late = parts.late
        rejects = late if rejects is None else rejects.select(*REJECT_COLUMNS).unionByName(late)
    return TransformResult(output, rejects, state={STATE: closed.state}, event_time=parts.times)
