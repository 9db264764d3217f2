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

from sluice_job import windows
from sluice_job.examples.on_time import on_time
from sluice_job.state import States
from sluice_job.transform import TransformResult

STATE = "visitors"


def transform(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _visitors(records, state, views=False)


def transform_v2(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _visitors(records, state, views=True)


def _visitors(records: DataFrame, state: States, *, views: bool) -> TransformResult:
    # Late records apart as read (dead letters), the others cleaned: examples.on_time.
    batch = on_time(records, state)
    visitors = state[STATE]
    values = [F.collect_set("user_id").alias("users")]
    merge = {"users": windows.UNION}
    if views:
        values.append(F.sum(F.when(F.col("action") == "view", 1).otherwise(0)).alias("views"))
        merge["views"] = windows.SUM
    partial_rows = (
        windows.assign(batch.events, "event_time", visitors)
        .groupBy("page", "window_start")
        .agg(*values)
    )
    closed = windows.close(partial_rows, visitors, batch.times, merge)
    output = closed.final.select(
        "page",
        "window_start",
        F.size("users").alias("visitors"),
        *([F.col("views")] if views else []),
    )
    return TransformResult(
        output, batch.rejects, state={STATE: closed.state}, event_time=batch.times
    )
