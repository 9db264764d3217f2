"""Example stateful transform: sessions per user, each written once, when final.

A session is a user's run of events less than the gap apart (30 minutes in
``examples/sessions-pipeline.yaml``). Which events make a session is only known once
the gap has passed in event time, and a session spans any number of batches: this
transform keeps each user's open sessions as a session state (docs/stateful.md) and
writes a session's row when the watermark passes its last event plus the gap. A
late event that bridges two open sessions joins them. Records behind the watermark
are rejects (``late: DeadLetter``) naming their event time. Declared as::

    eventTime: {allowedLatenessSeconds: 600}
    state:
      - name: sessions
        table: user_open_sessions
        key: [{name: user_id, type: text}]
        columns: [{name: events, type: bigint}]
        session: {gapSeconds: 1800}

Sink table (``examples/sessions-schema.cql``)::

    CREATE TABLE user_sessions (user_id text, session_start timestamp,
        session_end timestamp, events bigint, pages set<text>,
        PRIMARY KEY ((user_id), session_start))

Version 2 (:func:`transform_v2`) also keeps the session's distinct pages: its state
adds ``{name: pages, type: set<text>}``, and its output the ``pages`` column.
Sessions version 1 opened read ``pages`` as null and hold the pages version 2 saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job import sessions, windows
from sluice_job.examples.on_time import on_time
from sluice_job.state import States
from sluice_job.transform import TransformResult

STATE = "sessions"


def transform(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _sessions(records, state, pages=False)


def transform_v2(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _sessions(records, state, pages=True)


def _sessions(records: DataFrame, state: States, *, pages: bool) -> TransformResult:
    # Late records apart as read (dead letters), the others cleaned: examples.on_time.
    batch = on_time(records, state)
    values = [F.lit(1).cast("long").alias("events")]
    merge = {"events": windows.SUM}
    if pages:
        values.append(F.array(F.col("page")).alias("pages"))
        merge["pages"] = windows.UNION
    events = batch.events.select("user_id", "event_time", *values)
    closed = sessions.close(events, "event_time", state[STATE], batch.times, merge)
    output = closed.final.select(
        "user_id",
        sessions.SESSION_START,
        sessions.SESSION_END,
        "events",
        *([F.col("pages")] if pages else []),
    )
    return TransformResult(
        output, batch.rejects, state={STATE: closed.state}, event_time=batch.times
    )
