"""Batch planning: committed positions + Kafka watermarks -> the next offset ranges.

A purely computational function with no side effects; the runner fetches watermarks
and the checkpoint, calls :func:`plan`, reads exactly the ranges it returns, and
commits ``Plan.positions`` after the sink write succeeded. Bounded catch-up lives
here: every range is capped at ``max_records_per_partition``, so a backlog is drained
batch by batch, never scheduled at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sluice_api.source import OnOffsetOutOfRange, StartingOffsets
from sluice_job.offsets import OffsetRange, Positions, TopicPartition, Watermarks


class OffsetOutOfRangeError(Exception):
    """The checkpoint points outside what Kafka still holds, and policy is ``fail``."""

    def __init__(self, tp: TopicPartition, committed: int, marks: Watermarks) -> None:
        self.tp, self.committed, self.marks = tp, committed, marks
        super().__init__(
            f"{tp}: committed offset {committed} is beyond the end offset {marks.high} "
            f"of the partition (it holds [{marks.low}, {marks.high})): the topic was deleted "
            "and recreated, or the partition lost records; set "
            "source.kafka.onOffsetOutOfRange: earliest to resume at its earliest offset "
            f"{marks.low}"
            if committed > marks.high
            else f"{tp}: committed offset {committed} is outside the retained range "
            f"[{marks.low}, {marks.high}) (retention deleted records); set "
            "source.kafka.onOffsetOutOfRange: earliest to skip to the oldest retained record"
        )


@dataclass(frozen=True)
class Skip:
    """Where reading jumped from ``committed`` to ``resumed_at``: forward over records
    retention deleted, or back to the start of a partition whose end is now below the
    checkpoint (the topic was deleted and recreated, or the partition truncated)."""

    tp: TopicPartition
    committed: int
    resumed_at: int

    @property
    def count(self) -> int:
        """Records lost: those between the checkpoint and where reading resumed."""
        return max(0, self.resumed_at - self.committed)

    @property
    def beyond_end(self) -> bool:
        """The checkpoint was past the partition's end: Kafka no longer has the offsets
        it counted, so reading starts again at the partition's earliest offset."""
        return self.committed > self.resumed_at


@dataclass(frozen=True)
class Plan:
    ranges: tuple[OffsetRange, ...]
    positions: Mapping[TopicPartition, int]
    """Positions to commit once the ranges are written: the committed ones, moved on."""
    skips: tuple[Skip, ...] = field(default=())
    added: tuple[TopicPartition, ...] = field(default=())
    """Partitions new to a pipeline that has a checkpoint: read from their earliest."""

    @property
    def records(self) -> int:
        return sum(r.count for r in self.ranges)


@dataclass(frozen=True)
class Policy:
    starting_offsets: StartingOffsets
    on_out_of_range: OnOffsetOutOfRange
    max_records_per_partition: int


def plan(
    committed: Positions, watermarks: Mapping[TopicPartition, Watermarks], policy: Policy
) -> Plan:
    """Ranges for one batch. Partitions absent from ``watermarks`` keep their
    committed positions untouched. ``policy.starting_offsets`` places a pipeline with
    no checkpoint (no committed position at all); a partition that appears once the
    pipeline has one (partitions added to a topic, while running or while stopped)
    starts at its earliest offset, so none of its records is skipped."""
    positions = dict(committed)
    ranges: list[OffsetRange] = []
    skips: list[Skip] = []
    added: list[TopicPartition] = []
    for tp, marks in sorted(watermarks.items()):
        if committed and tp not in committed:
            added.append(tp)
        start, skip = _start(tp, committed.get(tp), marks, policy, fresh=not committed)
        if skip is not None:
            skips.append(skip)
        end = min(marks.high, start + policy.max_records_per_partition)
        if end > start:
            ranges.append(OffsetRange(tp, start, end))
        positions[tp] = end
    return Plan(ranges=tuple(ranges), positions=positions, skips=tuple(skips), added=tuple(added))


def starts(
    committed: Positions, watermarks: Mapping[TopicPartition, Watermarks], policy: Policy
) -> dict[TopicPartition, int]:
    """Per partition, the offset the next plan reads from: where lag counts from, from
    the driver's start, committed or not (the committed offset; with no checkpoint,
    ``policy.starting_offsets``; a partition new to a checkpoint, its earliest). Never
    raises: a checkpoint outside the retained range counts from the earliest offset,
    where ``onOffsetOutOfRange: earliest`` resumes (with ``fail``, the next plan stops
    the driver)."""
    result: dict[TopicPartition, int] = {}
    for tp, marks in watermarks.items():
        at = committed.get(tp)
        if at is not None and marks.low <= at <= marks.high:
            result[tp] = at
        else:
            result[tp] = _start(tp, None, marks, policy, fresh=not committed)[0]
    return result


def _start(
    tp: TopicPartition, committed: int | None, marks: Watermarks, policy: Policy, *, fresh: bool
) -> tuple[int, Skip | None]:
    if committed is None:
        latest = fresh and policy.starting_offsets is StartingOffsets.LATEST
        return (marks.high if latest else marks.low), None
    if marks.low <= committed <= marks.high:
        return committed, None
    if policy.on_out_of_range is OnOffsetOutOfRange.FAIL:
        raise OffsetOutOfRangeError(tp, committed, marks)
    return marks.low, Skip(tp, committed, marks.low)


def retained(
    ranges: tuple[OffsetRange, ...], watermarks: Mapping[TopicPartition, Watermarks]
) -> tuple[tuple[OffsetRange, ...], tuple[Skip, ...]]:
    """A planned batch's ranges after retention: starts raised to the oldest retained
    offset, ends kept (a batch id always covers the same end offsets), and what was
    lost. A range that retention deleted whole becomes empty and is left out, and so
    does a range that ends past the partition's end (the topic was recreated or the
    partition truncated: the offsets no longer name the records that were planned),
    whose records are all lost; the batch's positions still move past it, so the
    next plan finds the checkpoint beyond the end and follows the policy."""
    kept: list[OffsetRange] = []
    skips: list[Skip] = []
    for item in ranges:
        marks = watermarks.get(item.tp)
        if marks is not None and item.end > marks.high:
            skips.append(Skip(item.tp, item.start, item.end))
            continue
        start = item.start if marks is None else min(max(item.start, marks.low), item.end)
        if start > item.start:
            skips.append(Skip(item.tp, item.start, start))
        if start < item.end:
            kept.append(OffsetRange(item.tp, start, item.end))
    return tuple(kept), tuple(skips)
