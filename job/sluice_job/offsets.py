"""Kafka positions as plain values.

Convention, used everywhere in Sluice: an *offset* stored for a partition is the
**next offset to read** (Kafka's own consumer-position convention), and a range
``[start, end)`` excludes ``end``. A checkpoint ``{p0: 42}`` therefore means records
0..41 are done and 42 is the first record of the next batch; a batch reading
``[42, 50)`` commits ``{p0: 50}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}"


@dataclass(frozen=True)
class Watermarks:
    """The oldest offset still retained (``low``) and the end of what may be read:
    the last stable offset (``high``; the high watermark when no transaction is open)."""

    low: int
    high: int


@dataclass(frozen=True)
class OffsetRange:
    tp: TopicPartition
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start


Positions = Mapping[TopicPartition, int]


def to_json(positions: Positions) -> dict[str, dict[str, int]]:
    """``{topic: {"partition": offset}}``: the shape Spark's Kafka source takes for
    ``startingOffsets``/``endingOffsets`` and the shape checkpoints store."""
    result: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(positions.items()):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return result


def from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


def ranges_json(ranges: Iterable[OffsetRange]) -> dict[str, dict[str, list[int]]]:
    """``{topic: {"partition": [start, end]}}`` for logs and the batch history."""
    result: dict[str, dict[str, list[int]]] = {}
    for item in sorted(ranges, key=lambda r: r.tp):
        result.setdefault(item.tp.topic, {})[str(item.tp.partition)] = [item.start, item.end]
    return result
