"""Several Datastore commits of one partition in flight, without reordering a key.

Each commit is a round trip of tens of milliseconds, most of it waiting, so a
partition's chunks go out several at a time. Two chunks of one partition may hold
the same key (a transform that emits a key twice without the source position, see
``keys``); they carry the same write version, so whichever commits last wins, and
the later row must. A chunk that shares a key with one in flight therefore waits
for it before it starts; chunks with disjoint keys never wait for each other beyond
the concurrency bound.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from collections.abc import Set as AbstractSet
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

R = TypeVar("R")


class Flight(Generic[R]):
    """Runs jobs at most ``limit`` at a time (inline when ``limit`` is 1)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency {limit} must be positive")
        self._limit = limit
        self._pool = ThreadPoolExecutor(limit, "sluice-datastore") if limit > 1 else None
        self._running: list[tuple[AbstractSet[Hashable], Future[R]]] = []

    def submit(self, keys: AbstractSet[Hashable], job: Callable[[], R]) -> list[R]:
        """Start ``job`` once no running job shares a key with it and fewer than
        ``limit`` run; returns the results of the jobs that finished meanwhile."""
        if self._pool is None:
            return [job()]
        done = self._await([f for k, f in self._running if not k.isdisjoint(keys)])
        while len(self._running) >= self._limit:
            done += self._await([f for _, f in self._running], FIRST_COMPLETED)
        self._running.append((keys, self._pool.submit(job)))
        return done

    def drain(self) -> list[R]:
        """Waits for every running job; their results, in the order they started."""
        results = self._await([f for _, f in self._running])
        if self._pool is not None:
            self._pool.shutdown()
        return results

    def _await(self, futures: list[Future[R]], when: str = "ALL_COMPLETED") -> list[R]:
        if not futures:
            return []
        finished = wait(futures, return_when=when).done
        done = [(k, f) for k, f in self._running if f in finished]
        self._running = [(k, f) for k, f in self._running if f not in finished]
        return [f.result() for _, f in done]
