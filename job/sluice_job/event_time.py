"""Event time in a transform: the records behind the watermark, set apart.

A pipeline that declares ``spec.transform.eventTime`` has a watermark: the largest
event time its committed batches saw, minus the allowed lateness, kept in the
checkpoint row and never moved back (``sluice_api.event_time``). A transform calls
:func:`split` on its parsed events with the name of their event-time column and the
batch's state handle, and gets

* ``on_time``: the events at or after the watermark (and those with no event time),
* ``late``: with ``late: DeadLetter``, the others as rejects (the source record and a
  reason naming the event time and the watermark), to return as
  ``TransformResult.rejects``; ``None`` with ``late: Count``,
* ``times``: what to return as ``TransformResult.event_time``: every event's time and
  whether it is late. The driver counts the late ones (``sluice_late_records_total``)
  and moves the watermark to the newest on-time event minus the lateness, with the
  batch's commit, by a small job beside the sink's write.

The watermark a batch is measured against is the one committed before it, so a batch
run again after a crash sets apart the same records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sluice_api.event_time import LateRecords
from sluice_job.state.handle import States

EVENT_TIME: Final = "event_time"
"""The column of ``TransformResult.event_time`` holding each event's time."""
LATE: Final = "sluice_late"
"""The column of ``TransformResult.event_time`` that is true for a late event."""
RECORD_COLUMNS: Final = ("key", "value", "topic", "partition", "offset")


class EventTimeError(ValueError):
    """Event time is used without its declaration, or on events that cannot carry it."""


@dataclass(frozen=True)
class Split:
    """A batch's events, parted by the watermark (:func:`split`)."""

    on_time: DataFrame
    late: DataFrame | None
    """Rejects (``RECORD_COLUMNS`` and ``reason``) with ``late: DeadLetter``."""
    times: DataFrame
    """For ``TransformResult.event_time``."""


def split(events: DataFrame, column: str, state: States) -> Split:
    """``events`` parted by the batch's watermark on their ``column`` (a timestamp)."""
    declared = state.event_time
    if declared is None:
        raise EventTimeError(
            "sluice_job.event_time.split needs spec.transform.eventTime: declare the "
            "allowed lateness and what becomes of late records"
        )
    if column not in events.columns:
        raise EventTimeError(f"the events have no column {column!r} (they have {events.columns})")
    at = F.col(column).cast("timestamp")
    watermark = state.watermark_ms
    late = (
        F.lit(False)
        if watermark is None
        else F.coalesce(at < F.timestamp_millis(F.lit(watermark)), F.lit(False))
    )
    marked = events.withColumn(LATE, late)
    on_time = marked.where(~F.col(LATE)).drop(LATE)
    times = marked.select(at.alias(EVENT_TIME), F.col(LATE))
    if declared.late is LateRecords.COUNT:
        return Split(on_time, None, times)
    missing = [c for c in RECORD_COLUMNS if c not in events.columns]
    if missing:
        raise EventTimeError(
            f"late: DeadLetter sends late records as rejects, and the events lack the "
            f"record's column(s) {missing}: keep them through the parsing, or use late: Count"
        )
    behind = state.watermark.isoformat() if state.watermark is not None else ""
    reason = F.concat(
        F.lit("late: event time "),
        F.date_format(at, "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"),
        F.lit(
            f" is behind the watermark {behind} (allowed lateness "
            f"{declared.allowed_lateness_seconds} s)"
        ),
    )
    rejects = marked.where(F.col(LATE)).select(*RECORD_COLUMNS, reason.alias("reason"))
    return Split(on_time, rejects, times)


def newest_on_time(times: DataFrame) -> tuple[DataFrame, Column]:
    """A transform's ``event_time`` frame (its late column false where it has none),
    and the aggregate of its newest on-time event time in ms (null: none)."""
    if EVENT_TIME not in times.columns:
        raise EventTimeError(
            f"TransformResult.event_time has no column {EVENT_TIME!r} (it has {times.columns}): "
            "return sluice_job.event_time.split(...).times"
        )
    if LATE not in times.columns:
        times = times.withColumn(LATE, F.lit(False))
    on_time = F.when(~F.col(LATE), F.col(EVENT_TIME).cast("timestamp"))
    return times, F.unix_millis(F.max(on_time))


def newest_and_late(times: DataFrame) -> tuple[int | None, int]:
    """The newest on-time event time (ms; ``None``: none) and the late events'
    count, of a transform's ``event_time`` frame (one Spark job)."""
    times, newest = newest_on_time(times)
    row = times.agg(
        newest.alias("newest"), F.count(F.when(F.col(LATE), F.lit(1))).alias("late")
    ).first()
    if row is None:
        return None, 0
    newest = row["newest"]
    return (None if newest is None else int(newest)), int(row["late"] or 0)
