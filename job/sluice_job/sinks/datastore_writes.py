"""Which entities a chunk holds and which of them may be written (pure).

Commits carry at most :data:`MAX_MUTATIONS` entities, Datastore's limit. A chunk
holds each key once: a later row with the same key replaces the earlier one, so
within a Spark partition the last row of a key wins, as it would in a table.

The version rule (see ``write_order``): every entity carries the version of the
write that stored it in :data:`~.datastore_entities.VERSION_PROPERTY`. A write
replaces a stored entity unless the stored version is *greater*:

* greater: a later batch, or a newer driver's run of the same batch, stored it; our
  write is a late one (a fenced driver) and is skipped;
* equal: the same batch by the same driver (a Spark task retry, or our own retry
  of a commit whose reply was lost); it is the same data, so writing it again is
  idempotent and harmless, whereas skipping would be wrong if an earlier attempt
  wrote only part of what it meant to;
* smaller, absent, or not an integer (written by someone else): ours wins.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Final, TypeVar

MAX_MUTATIONS: Final = 500

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def chunks(items: Iterable[tuple[K, V]], size: int = MAX_MUTATIONS) -> Iterator[dict[K, V]]:
    """Consecutive chunks of at most ``size`` distinct keys; within a chunk the last
    value of a key wins."""
    if size < 1:
        raise ValueError(f"chunk size {size} must be positive")
    chunk: dict[K, V] = {}
    for key, value in items:
        if key not in chunk and len(chunk) == size:
            yield chunk
            chunk = {}
        chunk.pop(key, None)
        chunk[key] = value
    if chunk:
        yield chunk


def supersedes(ours: int, stored: Any) -> bool:
    """Whether a write of version ``ours`` replaces an entity whose stored version
    property is ``stored`` (``None`` when absent)."""
    if isinstance(stored, bool) or not isinstance(stored, int):
        return True
    return ours >= stored
