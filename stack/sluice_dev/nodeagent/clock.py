"""Timestamps in the two wire formats the API uses (``Time`` and ``MicroTime``).

Kept apart so that the status builders stay pure: they receive times, never read the
clock themselves.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    """A ``metav1.Time``: seconds precision, UTC, ``Z`` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro(moment: datetime) -> str:
    """A ``metav1.MicroTime`` (Lease renew times): microseconds, UTC, ``Z`` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
