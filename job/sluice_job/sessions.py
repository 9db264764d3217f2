"""Event-time sessions on keyed state: each session's result written once, when final.

A session state (``spec.transform.state[].session``) keeps one row per key holding
its open sessions: ``sluice_sessions`` maps each session's start to its last event's
time, and each declared value column is a map from the session's start to its value
(a session without a value has no entry: Cassandra's collections hold no nulls). A
key's events less than ``gapSeconds`` apart belong to one session. A transform gives
:func:`close` its on-time events (key, event time and value columns; one row per
event, or per key and time), which

* merges them with the key's stored sessions, in event time: an event within the gap
  of a session joins it, one that bridges two sessions joins them, and each value
  column combines by its :data:`~sluice_job.windows.Merge` (``SUM``, ``UNION``,
  ``MIN``, ``MAX``, ``LAST``) in event-time order;
* computes this batch's watermark as the driver will commit it;
* and parts the sessions: one whose last event plus the gap the watermark has
  reached is **final** (no on-time event can join it any more), the others stay open.

A key whose sessions the batch did not touch is found through the open-windows
index, where each written row is entered at its earliest session expiry; an entry
made stale by a later batch (the session grew) finds the key's sessions still open
and closes nothing. ``Closed.final`` holds each final session once (key,
``session_start``, ``session_end`` = its last event, values); ``Closed.state`` holds
the keys' open sessions and the deletion of the keys left with none.

Cost per batch: a lookup and a write per key touched or due in the index, and the
index's 16 partition reads, as for windows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sluice_api.state import DELETED_COLUMN, SESSIONS_COLUMN
from sluice_job import windows
from sluice_job.state.handle import KeyedState
from sluice_job.state.schema import Session
from sluice_job.windows import LAST, WATERMARK, Closed, Merge, WindowError

SESSION_START: Final = "session_start"
"""A final session's first event time (``Closed.final``)."""
SESSION_END: Final = "session_end"
"""A final session's last event time: it closed ``gapSeconds`` after it."""
_GROUP: Final = "sluice_session"
_STORED: Final = "sluice_stored"
"""Whether a session (or one it was joined from) was stored: its key had a row."""


def close(
    events: DataFrame,
    time: str,
    state: KeyedState,
    times: DataFrame,
    merge: Mapping[str, Merge],
) -> Closed:
    """Merge ``events`` (the state's key columns, the event-time column ``time`` and
    value columns) into the keys' stored sessions and part them by this batch's
    watermark, computed from ``times`` (``event_time.split(...).times``). A value
    column without a ``merge`` takes its latest event's value (``LAST``); one the
    events lack is null in their sessions."""
    session = _session(state)
    key = list(state.key)
    values = [c for c in state.columns if c != SESSIONS_COLUMN]
    unknown = sorted(set(merge) - set(values))
    if unknown:
        raise WindowError(f"state {state.name!r}: merge names column(s) {unknown} it lacks")
    types = _value_types(state, values)
    clock = windows.watermark(times, state)
    touched = events.select(*key).dropDuplicates()
    due = windows.closing_keys(clock, state).join(touched, key, "left_anti")
    stored_rows = state.lookup(touched.unionByName(due))
    stored = _stored_sessions(stored_rows, key, values)
    given = events.select(
        *key,
        F.col(time).cast("timestamp").alias(SESSION_START),
        F.col(time).cast("timestamp").alias(SESSION_END),
        F.lit(False).alias(_STORED),
        *(
            (F.col(v) if v in events.columns else F.lit(None)).cast(types[v]).alias(v)
            for v in values
        ),
    )
    merged = _sessionize(stored.unionByName(given), key, values, types, merge, session)
    gap_ms = session.gap_seconds * 1000
    expiry = F.unix_millis(F.col(SESSION_END)) + F.lit(gap_ms)
    parted = merged.crossJoin(clock).withColumn(
        "sluice_final", F.coalesce(expiry <= F.col(WATERMARK), F.lit(False))
    )
    final = parted.where(F.col("sluice_final")).select(*key, SESSION_START, SESSION_END, *values)
    still_open = ~F.col("sluice_final")
    # One aggregation per key, so that the lookup runs once in the state's write job.
    per_key = parted.groupBy(*key).agg(
        F.map_from_entries(
            F.collect_list(F.when(still_open, F.struct(SESSION_START, SESSION_END)))
        ).alias(SESSIONS_COLUMN),
        *(_by_session(v, still_open).alias(v) for v in values),
        F.max(_STORED).alias(_STORED),
    )
    emptied = F.size(F.col(SESSIONS_COLUMN)) == 0
    new_state = per_key.where(~emptied | F.col(_STORED)).select(
        *key,
        *(F.when(~emptied, F.col(c)).alias(c) for c in (SESSIONS_COLUMN, *values)),
        emptied.alias(DELETED_COLUMN),
    )
    return Closed(final, new_state)


def _by_session(value: str, still_open: Column) -> Column:
    """A key's ``value`` per open session start, leaving out sessions without one."""
    present = still_open & F.col(value).isNotNull()
    return F.map_from_entries(F.collect_list(F.when(present, F.struct(SESSION_START, value))))


def _session(state: KeyedState) -> Session:
    session = state.target.schema.session
    if session is None:
        raise WindowError(
            f"state {state.name!r} declares no session: set spec.transform.state[].session"
        )
    return session


def _value_types(state: KeyedState, values: list[str]) -> dict[str, T.DataType]:
    """Each value column's type in one session (the map's value type)."""
    found: dict[str, T.DataType] = {}
    for field in state.target.schema.spark_types(values).fields:
        assert isinstance(field.dataType, T.MapType)
        found[field.name] = field.dataType.valueType
    return found


def _stored_sessions(rows: DataFrame, key: list[str], values: list[str]) -> DataFrame:
    """A lookup's rows as one row per open session: key, start, end and values."""
    exploded = rows.select(
        *key, *values, F.explode(SESSIONS_COLUMN).alias(SESSION_START, SESSION_END)
    )
    return exploded.select(
        *key,
        SESSION_START,
        SESSION_END,
        F.lit(True).alias(_STORED),
        *(F.element_at(F.col(v), F.col(SESSION_START)).alias(v) for v in values),
    )


def _sessionize(
    sessions: DataFrame,
    key: list[str],
    values: list[str],
    types: Mapping[str, T.DataType],
    merge: Mapping[str, Merge],
    session: Session,
) -> DataFrame:
    """``sessions`` (stored sessions and single events) joined where one starts less
    than the gap after the latest end before it: one row per key and session."""
    ordered = Window.partitionBy(*key).orderBy(SESSION_START, SESSION_END)
    before = F.max(SESSION_END).over(ordered.rowsBetween(Window.unboundedPreceding, -1))
    gap_ms = F.lit(session.gap_seconds * 1000)
    starts = before.isNull() | (
        F.unix_millis(F.col(SESSION_START)) >= F.unix_millis(before) + gap_ms
    )
    numbered = sessions.withColumn("sluice_starts", starts.cast("int")).withColumn(
        _GROUP,
        F.sum("sluice_starts").over(ordered.rowsBetween(Window.unboundedPreceding, 0)),
    )
    return numbered.groupBy(*key, _GROUP).agg(
        F.min(SESSION_START).alias(SESSION_START),
        F.max(SESSION_END).alias(SESSION_END),
        F.max(_STORED).alias(_STORED),
        *(_combined(v, types[v], merge.get(v, LAST)).alias(v) for v in values),
    )


def _combined(value: str, kind: T.DataType, merge: Merge) -> Column:
    """A session's ``value``: its parts' values combined by ``merge`` in event-time
    order; null when none of its parts has one."""
    parts = F.array_sort(F.collect_list(F.struct(SESSION_START, SESSION_END, value)), _by_start)
    combined = F.aggregate(
        parts, F.lit(None).cast(kind), lambda acc, part: merge(acc, part[value]).cast(kind)
    )
    return F.when(F.exists(parts, lambda part: part[value].isNotNull()), combined)


def _by_start(left: Column, right: Column) -> Column:
    """``array_sort``'s comparator: by session start (values need not be orderable)."""
    earlier, later = left[SESSION_START], right[SESSION_START]
    return F.when(earlier < later, -1).when(earlier > later, 1).otherwise(0)
