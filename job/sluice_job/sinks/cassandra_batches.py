"""Grouping a partition's writes into bounded batches, one replica set at a time.

Cassandra takes many rows per request far better than one (on the development
machine, unlogged batches of ten rows put three to four times as many rows per second
into the same table as one INSERT per row). An unlogged batch is not atomic and
does not go through the batch log: it only saves round trips, and it saves them only
when every row of it belongs to the nodes that receive it. So writes are grouped by
their *replica set* (the nodes that own the row's token, as the driver's token map
says), as the Spark Cassandra Connector groups them, and each batch is bounded:

* by rows: Cassandra warns about an unlogged batch that spans more partitions than
  ``unlogged_batch_across_partitions_warn_threshold`` (10 by default);
* by bytes: it warns above ``batch_size_warn_threshold`` (5 KiB by default) and
  refuses above ``batch_size_fail_threshold`` (50 KiB).

A row larger than the byte bound on its own still goes, alone. Pure: the grouping
knows nothing about statements or sessions, only keys, sizes and items.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from sluice_api.sink import CASSANDRA_BATCH_BYTES, CASSANDRA_BATCH_ROWS

Item = TypeVar("Item")

DEFAULT_ROWS: Final = CASSANDRA_BATCH_ROWS
"""Rows per batch: Cassandra's default warning threshold for partitions per
unlogged batch (every row of an append-style table is its own partition)."""
DEFAULT_BYTES: Final = CASSANDRA_BATCH_BYTES
"""Estimated bytes per batch: below the default 5 KiB warning threshold, with room
for what the estimate leaves out (cell headers, the partition key's framing)."""
CELL_OVERHEAD: Final = 8
"""Bytes added per value to its serialized length by the estimate: a cell's write
timestamp, which Cassandra counts in a mutation's size."""


@dataclass(frozen=True)
class Bounds:
    rows: int = DEFAULT_ROWS
    bytes: int = DEFAULT_BYTES

    def __post_init__(self) -> None:
        if self.rows < 1 or self.bytes < 1:
            raise ValueError(f"batch bounds must be positive: {self}")


@dataclass
class _Open(Generic[Item]):
    items: list[Item] = field(default_factory=list)
    size: int = 0


def grouped(
    writes: Iterable[tuple[Hashable, int, Item]], bounds: Bounds = Bounds()
) -> Iterator[list[Item]]:
    """Batches of ``(group, size, item)`` writes: each batch holds items of one group
    only, at most ``bounds.rows`` of them and, unless it holds a single item, at most
    ``bounds.bytes`` of size. Every item is in exactly one batch, in its input order
    within its group. A batch is yielded as soon as it is full, so at most one batch
    per group is held at a time; the rest come at the end."""
    open_batches: dict[Hashable, _Open[Item]] = {}
    for group, size, item in writes:
        batch = open_batches.get(group)
        if batch is not None and batch.items and batch.size + size > bounds.bytes:
            yield batch.items
            batch = None
        if batch is None:
            batch = open_batches[group] = _Open()
        batch.items.append(item)
        batch.size += size
        if len(batch.items) >= bounds.rows or batch.size >= bounds.bytes:
            yield batch.items
            del open_batches[group]
    for batch in open_batches.values():
        yield batch.items


def estimated_size(values: Iterable[bytes | None]) -> int:
    """What a row's serialized values weigh in a batch, as Cassandra's batch size
    check counts them (closely enough to stay below its thresholds)."""
    return sum(CELL_OVERHEAD + (len(v) if v is not None else 0) for v in values)
