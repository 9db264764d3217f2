"""The event-time examples' first step: records behind the watermark set apart as they
were read, the others cleaned as the KPI example cleans them; and their rejects
together. Shared by ``unique_visitors`` and ``sessions``.

Late records are found by the event time in their JSON (``ts``) before cleaning, so
that they go to the dead-letter destination unchanged, with their reason; the
on-time ones are cleaned (malformed ones are rejects with their reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job import event_time
from sluice_job.examples.ui_events import clean
from sluice_job.state import States
from sluice_job.transform import REJECT_COLUMNS, TransformResult

EVENT_TIME: Final = "sluice_event_time"


@dataclass(frozen=True)
class OnTime:
    """A batch's events as the event-time examples start from them."""

    events: DataFrame
    """The on-time events, cleaned (``ui_events.clean``'s output)."""
    times: DataFrame
    """For ``TransformResult.event_time`` and ``windows.close`` / ``sessions.close``."""
    rejects: DataFrame | None
    """The malformed records and the late ones, each with its reason."""


def on_time(records: DataFrame, state: States) -> OnTime:
    ts = F.get_json_object(F.col("value").cast("string"), "$.ts").cast("long")
    stamped = records.withColumn(EVENT_TIME, F.timestamp_millis(ts))
    parts = event_time.split(stamped, EVENT_TIME, state)
    cleaned: TransformResult = clean(parts.on_time.drop(EVENT_TIME))
    rejects = cleaned.rejects
    if parts.late is not None:
        late = parts.late
        rejects = late if rejects is None else rejects.select(*REJECT_COLUMNS).unionByName(late)
    return OnTime(cleaned.output, parts.times, rejects)
