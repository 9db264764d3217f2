"""Offset reset: where a replay or a skip (``spec.offsetReset``) moves the positions.

A purely computational function. The runner applies a reset once per id, right
after its claim (so under a new epoch, which fences every older driver), and before
anything else: it fetches the watermarks (and, for a timestamp, the first offset at or
after it per partition), calls :func:`targets`, and records the move as a batch of
its own in the checkpoint (no ranges, the new positions, a new write version), whose
history row says who asked and why. A batch an earlier driver planned and never
committed is dropped: the reset says where reading goes on.

Writes made after a replay carry newer write versions (``write_order``: they follow
the clock), so replayed records replace what the sink holds for their keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from sluice_api.offset_reset import OffsetReset, ResetTo
from sluice_job import offsets
from sluice_job.offsets import Positions, TopicPartition, Watermarks


class ResetError(Exception):
    """The reset cannot be applied as written (exit 2): the message names the field."""


@dataclass(frozen=True)
class AppliedReset:
    """A reset, resolved: the positions before and after."""

    request: OffsetReset
    before: dict[TopicPartition, int]
    after: dict[TopicPartition, int]

    def history_json(self) -> str:
        """The history row's ``reset`` column: what was asked, by whom, and the move."""
        asked = self.request.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(
            {
                **asked,
                "from": offsets.to_json(self.before),
                "positions": offsets.to_json(self.after),
            },
            sort_keys=True,
        )


def targets(
    request: OffsetReset,
    current: Positions,
    marks: Mapping[TopicPartition, Watermarks],
    at_time: Mapping[TopicPartition, int | None] | None = None,
) -> dict[TopicPartition, int]:
    """The positions after ``request``, given the committed ones and the watermarks of
    every partition of the source's topics. ``at_time`` (for ``Timestamp``) holds the
    first offset at or after the timestamp, ``None`` where no record is that recent.
    Partitions the reset does not move keep their positions."""
    result = dict(current)
    if request.to is ResetTo.EARLIEST:
        result.update({tp: m.low for tp, m in marks.items()})
    elif request.to is ResetTo.LATEST:
        result.update({tp: m.high for tp, m in marks.items()})
    elif request.to is ResetTo.TIMESTAMP:
        if at_time is None:
            raise ValueError("a Timestamp reset needs the offsets at that time")
        result.update({tp: _at(at_time.get(tp), m) for tp, m in marks.items()})
    else:
        result.update(_explicit(request, marks))
    return result


def _at(found: int | None, marks: Watermarks) -> int:
    """The first offset at or after the time, kept inside what Kafka holds and may be
    read (its end, the last stable offset, where no record is that recent)."""
    if found is None or found < 0:
        return marks.high
    return min(max(found, marks.low), marks.high)


def _explicit(
    request: OffsetReset, marks: Mapping[TopicPartition, Watermarks]
) -> dict[TopicPartition, int]:
    result = {}
    for item in request.offsets or []:
        tp = TopicPartition(item.topic, item.partition)
        held = marks.get(tp)
        if held is None:
            raise ResetError(f"offsetReset.offsets: {tp} is not a partition of the topic")
        if not held.low <= item.offset <= held.high:
            raise ResetError(
                f"offsetReset.offsets: offset {item.offset} of {tp} is outside "
                f"[{held.low}, {held.high}], what the partition holds"
            )
        result[tp] = item.offset
    return result
