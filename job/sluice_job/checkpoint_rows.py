"""What a checkpoint row holds: the committed checkpoint and the batch planned ahead.

Plain values the store reads and writes (``checkpoint``) and the runner plans with,
kept apart from the store's Cassandra I/O so that pure code (the runner, its ports,
the hot standby's decisions, the metrics) uses them without the Cassandra driver. A planned batch is
stored as JSON (:meth:`Batch.to_json`) in the checkpoint row, so that whichever driver
executes the batch reads the same ranges and the same write version.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sluice_job import offsets
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_job.planner import Skip


@dataclass(frozen=True)
class Batch:
    """A planned batch: its id, its ranges and the positions once it is done."""

    batch_id: int
    ranges: tuple[OffsetRange, ...]
    positions: dict[TopicPartition, int]
    version: int = 0
    """The batch's write version (``write_order``), fixed when it is planned; 0 for a
    batch planned by a driver that predates versions (it gets one when recovered)."""
    lost: tuple[Skip, ...] = field(default=(), compare=False)
    """Skips (``planner.Skip``) of a recovered batch whose starts retention deleted:
    recorded in its history row (``lost``), never in the plan."""
    spool: str = ""
    """A Pub/Sub batch's messages, kept under this id in the spool (``pubsub.spool``)
    so that whoever executes the batch reads the same messages; empty for Kafka."""
    event_watermark: int | None = field(default=None, compare=False)
    """The event-time watermark (ms) its execution moved the pipeline's to
    (``sluice_api.event_time.advance``), set before its commit; ``None``: unchanged."""
    letters_durable: bool = field(default=False, compare=False)
    """Its dead letters are durable (the checkpoint row says so): a re-run of the
    batch does not write them again (``CheckpointStore.letters_durable``)."""

    @property
    def records(self) -> int:
        return sum(r.count for r in self.ranges)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "ranges": offsets.ranges_json(self.ranges),
            "positions": offsets.to_json(self.positions),
            "version": self.version,
        }
        if self.spool:
            data["spool"] = self.spool
        return json.dumps(data)

    @classmethod
    def from_json(cls, batch_id: int, text: str) -> Batch:
        data = json.loads(text)
        ranges = tuple(
            OffsetRange(TopicPartition(topic, int(p)), span[0], span[1])
            for topic, parts in data["ranges"].items()
            for p, span in parts.items()
        )
        return cls(
            batch_id,
            ranges,
            offsets.from_json(data["positions"]),
            int(data.get("version", 0)),
            spool=str(data.get("spool", "")),
        )


@dataclass(frozen=True)
class Checkpoint:
    batch_id: int
    positions: dict[TopicPartition, int]
    epoch: int
    owner: uuid.UUID | None
    code_version: str
    released: bool
    planned: Batch | None = None
    """Batch ``batch_id + 1`` if it was planned but not committed: to be re-executed."""
    version: int = 0
    """The write version of batch ``batch_id`` (0 before versions were stored): the
    next batch's version is greater (``write_order``)."""
    resets: frozenset[str] = frozenset()
    """Ids of the offset resets applied to the pipeline (``reset``)."""
    committed_at: datetime | None = None
    """When batch ``batch_id`` was committed (its history row), as :meth:`CheckpointStore.claim`
    returns it; ``None`` when unknown or when nothing was committed."""
    event_watermark: int | None = None
    """The event-time watermark (ms) as batch ``batch_id`` committed it; ``None``: the
    pipeline declares no event time, or has seen none."""
