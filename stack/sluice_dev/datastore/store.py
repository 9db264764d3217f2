"""The entities of every project, in memory, and the versions that order writes.

Each commit takes the next value of one counter as its version, which every entity
it writes (or deletes) carries: a transaction remembers the versions it read and
its commit fails if any of them changed meanwhile. A deleted entity stays as a
tombstone with its version so that "read missing, then created and deleted by
someone else" still counts as a change.

One re-entrant lock guards everything; the commit path holds it across checking
and writing so a commit is atomic. Queries page through a partition in key order,
kept sorted until the partition's next write.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sluice_dev.datastore.keys import Element, Order, Partition, StoreKey, order

Path = tuple[Element, ...]

FIRST_ALLOCATED_ID = 5_000_000_001
"""Ids the server allocates start here, far from small hand-picked ids."""


@dataclass(frozen=True)
class Record:
    entity: Any | None
    """The stored ``Entity`` protobuf, or ``None`` for a tombstone."""
    version: int


class Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._partitions: dict[Partition, dict[Path, Record]] = {}
        self._ordered: dict[Partition, list[tuple[Order, Path]]] = {}
        self._version = 0
        self._ids = itertools.count(FIRST_ALLOCATED_ID)

    @property
    def version(self) -> int:
        """The version of the latest commit: what a read right now observes."""
        with self.lock:
            return self._version

    def get(self, key: StoreKey) -> Record | None:
        """The live entity's record, or ``None`` if absent (tombstones included)."""
        record = self.record(key)
        return record if record is not None and record.entity is not None else None

    def record(self, key: StoreKey) -> Record | None:
        with self.lock:
            return self._partitions.get(key.partition, {}).get(key.path)

    def version_of(self, key: StoreKey) -> int:
        """The version of the key's last write or delete; 0 if never written."""
        record = self.record(key)
        return record.version if record else 0

    def write(self, changes: Mapping[StoreKey, Any | None]) -> int:
        """Store every entity (``None`` deletes) at one new version; returns it."""
        with self.lock:
            self._version += 1
            for key, entity in changes.items():
                rows = self._partitions.setdefault(key.partition, {})
                rows[key.path] = Record(entity, self._version)
                self._ordered.pop(key.partition, None)
            return self._version

    def scan(
        self, partition: Partition, kind: str | None, after: Order | None = None
    ) -> Iterator[tuple[StoreKey, Record]]:
        """Live entities of a partition (of one kind, or all) in key order, from the
        first key past ``after``."""
        with self.lock:
            rows = self._partitions.get(partition, {})
            ordered = self._sorted(partition, rows)
        start = 0 if after is None else bisect.bisect_right(ordered, after, key=lambda i: i[0])
        for _, path in itertools.islice(ordered, start, None):
            record = rows.get(path)
            if record is None or record.entity is None:
                continue  # a tombstone
            if kind is None or path[-1][0] == kind:
                yield StoreKey(partition, path), record

    def _sorted(self, partition: Partition, rows: dict[Path, Record]) -> list[tuple[Order, Path]]:
        ordered = self._ordered.get(partition)
        if ordered is None:
            ordered = sorted((order(path), path) for path in rows)
            self._ordered[partition] = ordered
        return ordered

    def new_id(self) -> int:
        """An id for an incomplete key; unique on this server, so in every partition."""
        with self.lock:
            return next(self._ids)

    def count(self, project: str) -> int:
        with self.lock:
            return sum(
                1
                for partition, rows in self._partitions.items()
                if partition[0] == project
                for record in rows.values()
                if record.entity is not None
            )

    def forget(self, project: str) -> None:
        with self.lock:
            for partition in [p for p in self._partitions if p[0] == project]:
                del self._partitions[partition]
                self._ordered.pop(partition, None)
