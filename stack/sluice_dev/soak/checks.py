"""The checks at the end of a soak, as pure functions over what was read back: the
batch history is one chain, the sink holds every committed valid record once and no
aborted one, the dead-letter topic holds every committed malformed record with its
reason, and the checkpoint sits at Kafka's last stable offsets.

Offsets follow the checkpoint's convention: a range ``[start, end)`` and a position
are the *next* offset to read. Transaction markers take offsets too, so ranges are
compared with each other and with the log's offsets, never with record counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sluice_dev.soak.ledger import Expectation


@dataclass(frozen=True)
class Batch:
    """A committed batch of the history: its id, epoch and ranges per partition."""

    batch_id: int
    epoch: int
    ranges: Mapping[int, tuple[int, int]]


@dataclass(frozen=True)
class Chain:
    batches: int
    gaps: int
    """Offsets no committed batch covers, between the start and the checkpoint."""
    overlaps: int
    """Offsets covered by more than one committed batch."""
    missing_ids: int
    """Batch ids between 1 and the last one that are not in the history."""
    ends_off_checkpoint: int
    """Partitions whose chain does not end at the checkpoint's position."""


def chain(
    batches: Sequence[Batch], starts: Mapping[int, int], checkpoint: Mapping[int, int]
) -> Chain:
    """Check that the committed batches tile each partition from its start to the
    checkpoint: no gap, no overlap, consecutive batch ids."""
    per_partition: dict[int, list[tuple[int, int]]] = {p: [] for p in starts}
    for batch in batches:
        for partition, (start, end) in batch.ranges.items():
            if end > start:
                per_partition.setdefault(partition, []).append((start, end))
    gaps = overlaps = off = 0
    for partition, ranges in per_partition.items():
        reached = starts.get(partition, 0)
        for start, end in sorted(ranges):
            gaps += max(0, start - reached)
            overlaps += max(0, min(end, reached) - start)
            reached = max(reached, end)
        position = checkpoint.get(partition, starts.get(partition, 0))
        gaps += max(0, position - reached)
        off += position != reached
    ids = {b.batch_id for b in batches}
    missing_ids = (max(ids) - len(ids)) if ids else 0
    return Chain(len(batches), gaps, overlaps, missing_ids, off)


@dataclass(frozen=True)
class SinkCheck:
    rows: int
    missing: int
    """Committed valid records not in the sink."""
    repeated: int
    """Rows beyond the first for one record."""
    aborted: int
    """Rows of records whose transaction was aborted."""
    unexpected: int
    """Rows of records that should not be there for another reason (malformed)."""


def sink(expect: Expectation, seqs: Iterable[int]) -> SinkCheck:
    counts = Counter(seqs)
    return SinkCheck(
        rows=sum(counts.values()),
        missing=sum(1 for s in expect.valid if s not in counts),
        repeated=sum(n - 1 for n in counts.values()),
        aborted=sum(1 for s in counts if s in expect.aborted),
        unexpected=sum(1 for s in counts if s not in expect.valid and s not in expect.aborted),
    )


@dataclass(frozen=True)
class DeadLetter:
    seq: int
    reason: str


@dataclass(frozen=True)
class DeadLetterCheck:
    letters: int
    missing: int
    """Committed malformed records with no dead letter."""
    wrong_reason: int
    """Committed malformed records with a dead letter giving another reason."""
    aborted: int
    """Records of aborted transactions in the dead-letter topic."""
    unexpected: int
    """Dead letters of records that are neither malformed nor aborted."""
    repeats: int
    """Dead letters beyond the first per record: allowed (delivery is at least once
    and the headers identify the record), reported for information."""


def dead_letters(expect: Expectation, letters: Sequence[DeadLetter]) -> DeadLetterCheck:
    reasons: dict[int, set[str]] = {}
    for letter in letters:
        reasons.setdefault(letter.seq, set()).add(letter.reason)
    return DeadLetterCheck(
        letters=len(letters),
        missing=sum(1 for s in expect.rejected if s not in reasons),
        wrong_reason=sum(
            1 for s, want in expect.rejected.items() if s in reasons and reasons[s] != {want}
        ),
        aborted=sum(1 for s in reasons if s in expect.aborted),
        unexpected=sum(1 for s in reasons if s not in expect.rejected and s not in expect.aborted),
        repeats=len(letters) - len(reasons),
    )


def offsets_off(checkpoint: Mapping[int, int], stable: Mapping[int, int]) -> dict[int, str]:
    """Partitions whose committed position is not Kafka's last stable offset."""
    return {
        p: f"checkpoint {checkpoint.get(p)} != last stable {stable.get(p)}"
        for p in sorted(checkpoint.keys() | stable.keys())
        if checkpoint.get(p) != stable.get(p)
    }
