"""Replay or skip: ``spec.offsetReset``, a one-off move of the committed positions,
applied once per id by the next driver.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Final, Self

from pydantic import Field, model_validator

from sluice_api.spec_base import Model


class ResetTo(StrEnum):
    EARLIEST = "Earliest"
    LATEST = "Latest"
    TIMESTAMP = "Timestamp"
    OFFSETS = "Offsets"


class PartitionOffset(Model):
    """Where one partition resumes after an offset reset."""

    topic: str = Field(
        pattern=r"^[a-zA-Z0-9._-]{1,249}$",
        max_length=249,
        description="One of source.kafka.topics.",
    )
    partition: int = Field(ge=0, le=1_000_000, description="Partition number.")
    offset: int = Field(
        ge=0,
        le=2**63 - 1,
        description="The next offset to read (Kafka's consumer-position convention).",
    )


RESET_ID: Final = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"


class OffsetReset(Model):
    """A one-off move of the committed positions: replay or skip.

    Applied once per ``id`` by the next driver, under its new epoch (which fences any
    older driver), before its first batch; the reset is a batch of its own in the
    checkpoint's history, with ``requestedBy`` and ``reason``. Setting a new ``id``
    stops the running driver cleanly first, as any spec change does."""

    id: str = Field(
        pattern=RESET_ID,
        max_length=63,
        description="Names this reset; a new id is a new reset, the same id is applied once.",
    )
    to: ResetTo = Field(
        description=(
            "Earliest (replay all that Kafka retains), Latest (skip to the last stable "
            "offsets), Timestamp (the first record at or after timestamp, per partition; "
            "the end where there is none) or Offsets (the partitions listed in offsets; "
            "the others keep their positions)."
        )
    )
    timestamp: str | None = Field(
        default=None,
        max_length=64,
        description="RFC 3339 time, for to: Timestamp.",
        json_schema_extra={"format": "date-time"},
    )
    offsets: list[PartitionOffset] | None = Field(
        default=None, max_length=1_000, description="Positions, for to: Offsets."
    )
    reason: str = Field(
        default="", max_length=1024, description="Why, for the checkpoint's batch history."
    )
    requested_by: str = Field(
        default="", max_length=253, description="Who asked (the sluice command sets it)."
    )

    @model_validator(mode="after")
    def target_fits_to(self) -> Self:
        if (self.to is ResetTo.TIMESTAMP) != (self.timestamp is not None):
            raise ValueError(
                "offsetReset.timestamp is set exactly when offsetReset.to is Timestamp"
            )
        if (self.to is ResetTo.OFFSETS) != bool(self.offsets):
            raise ValueError("offsetReset.offsets is set exactly when offsetReset.to is Offsets")
        if self.timestamp is not None:
            self.epoch_millis()
        named = [(p.topic, p.partition) for p in self.offsets or []]
        if len(set(named)) != len(named):
            raise ValueError("offsetReset.offsets names a partition twice")
        return self

    def epoch_millis(self) -> int:
        """``timestamp`` in milliseconds since the epoch (Kafka's record time)."""
        if self.timestamp is None:
            raise ValueError("offsetReset.timestamp is not set")
        try:
            when = datetime.fromisoformat(self.timestamp.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"offsetReset.timestamp {self.timestamp!r} is not an RFC 3339 time"
            ) from None
        if when.tzinfo is None:
            raise ValueError(f"offsetReset.timestamp {self.timestamp!r} needs a time zone")
        return int(when.timestamp() * 1000)
