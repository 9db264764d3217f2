"""Event time, as a pipeline declares it: ``spec.transform.eventTime``.

A pipeline that declares event time has a *watermark*: the largest event time its
committed batches saw, minus the allowed lateness. The driver keeps it in the
checkpoint row, moves it with each commit and never back (across restarts, upgrades
and offset resets), and hands it to the transform, which sends the records behind it
to the dead-letter destination with their reason, or counts them
(``sluice_job.event_time``). The driver and the operator agree on the declaration
here; :func:`advance` is the one rule for moving the watermark.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from pydantic import Field

from sluice_api.spec_base import Model

LATENESS_MAX_SECONDS: Final = 7 * 24 * 3600


class LateRecords(StrEnum):
    """What becomes of a record whose event time is behind the watermark."""

    DEAD_LETTER = "DeadLetter"
    """Returned as a reject, with the reason: it goes to ``spec.deadLetter``."""
    COUNT = "Count"
    """Left out and counted (``sluice_late_records_total``, the batch's log line)."""


class EventTime(Model):
    """The pipeline's event time: how late a record may be."""

    allowed_lateness_seconds: int = Field(
        default=0,
        ge=0,
        le=LATENESS_MAX_SECONDS,
        description=(
            "How far behind the largest event time seen a record may be and still count: "
            "the watermark is that time minus this."
        ),
    )
    late: LateRecords = Field(
        default=LateRecords.DEAD_LETTER,
        description=(
            "A record behind the watermark: DeadLetter (a reject with its reason, to "
            "spec.deadLetter) or Count (left out, counted in sluice_late_records_total)."
        ),
    )


def advance(watermark: int | None, newest_ms: int | None, lateness_seconds: int) -> int | None:
    """The watermark (milliseconds) after a batch whose newest on-time event is at
    ``newest_ms`` (``None``: it had none): never behind ``watermark``."""
    if newest_ms is None:
        return watermark
    return later(watermark, newest_ms - lateness_seconds * 1000)


def later(watermark: int | None, other: int | None) -> int | None:
    """The later of two watermarks (``None``: none yet)."""
    if watermark is None or other is None:
        return other if watermark is None else watermark
    return max(watermark, other)
