"""Adopting a checkpoint row written before cluster ids, exactly once.

Drivers before cluster ids keyed the checkpoint by ``namespace/name``; drivers now
key it by ``cluster/namespace/name`` (``sluice_api.cluster``). A driver that finds
no row under its key but a legacy row takes the legacy row over, so an upgrade of
Sluice neither re-reads nor skips:

1. *fence* the legacy row with an LWT that sets this driver's epoch and owner and
   marks it ``adopted_by`` this key, only if its epoch is older and nobody else
   adopted it: a driver of the old version still running can no longer commit there,
   and no other cluster adopts it after;
2. *copy* the fenced row (positions, planned batch, write version, applied resets,
   last batch) into a new row under this key (``INSERT ... IF NOT EXISTS``), and the
   last batch's history row, so batch ids and write versions go on where they were.

A driver that dies between the steps leaves the legacy row marked with this key: the
next driver of the same cluster (a newer epoch) fences it again and copies. A legacy
row marked by another cluster's key is left alone: this cluster starts the pipeline
afresh under its own key.

A purely computational module: :func:`next_step` decides from what the driver read;
``CheckpointStore.claim`` performs the reads and LWTs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import Enum


class Step(Enum):
    NOTHING = "nothing"
    """A row under this key exists, or no legacy row: claim as usual."""
    FENCE = "fence"
    """Take the legacy row for this epoch (LWT), then copy it."""
    COPY = "copy"
    """This driver holds the legacy row already (an earlier attempt): copy it."""
    ELSEWHERE = "elsewhere"
    """Another cluster adopted the legacy row: start afresh under this key."""
    FENCED = "fenced"
    """A driver with this epoch or a newer one holds the legacy row."""


@dataclass(frozen=True)
class Legacy:
    """What the adoption needs of a legacy row."""

    epoch: int
    owner: uuid.UUID | None
    adopted_by: str | None


def next_step(own_row: bool, legacy: Legacy | None, key: str, owner: uuid.UUID, epoch: int) -> Step:
    """What a driver of ``epoch`` (process ``owner``) keyed by ``key`` does next."""
    if own_row or legacy is None:
        return Step.NOTHING
    if legacy.adopted_by not in (None, key):
        return Step.ELSEWHERE
    if legacy.owner == owner and legacy.epoch == epoch:
        return Step.COPY
    if legacy.epoch >= epoch:
        return Step.FENCED
    return Step.FENCE
