"""Fault switches and call counters, kept per project.

A test asks for "the next N calls of Commit fail UNAVAILABLE" in its own project
(a unique name), so test runs sharing one server never see each other's faults or
counts. A fault strikes *before* the call does anything, or *after* it took
effect: the reply is lost, the change is not, which is what a timeout after a
successful commit looks like to a client. A hold makes the next calls wait until
the test releases them.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import grpc

MAX_COMMIT_SIZES: Final = 100_000
MAX_HOLD_SECONDS: Final = 120.0


class Method(StrEnum):
    LOOKUP = "Lookup"
    RUN_QUERY = "RunQuery"
    BEGIN_TRANSACTION = "BeginTransaction"
    COMMIT = "Commit"
    ROLLBACK = "Rollback"
    ALLOCATE_IDS = "AllocateIds"
    RESERVE_IDS = "ReserveIds"


class When(StrEnum):
    BEFORE = "before"
    AFTER = "after"


@dataclass(frozen=True)
class Fault:
    code: grpc.StatusCode
    when: When

    @property
    def message(self) -> str:
        return f"injected {self.code.name} ({self.when.value} the call took effect)"


def status_code(name: str) -> grpc.StatusCode:
    try:
        return grpc.StatusCode[name.upper()]
    except KeyError:
        raise ValueError(f"no gRPC status code {name!r}") from None


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, Method], deque[Fault]] = {}

    def inject(self, project: str, method: Method, fault: Fault, count: int) -> None:
        with self._lock:
            self._queues.setdefault((project, method), deque()).extend([fault] * count)

    def take(self, project: str, method: Method, when: When) -> Fault | None:
        """The fault for this call at this moment, consumed; ``None`` if none."""
        with self._lock:
            queue = self._queues.get((project, method))
            if not queue or queue[0].when is not when:
                return None
            return queue.popleft()

    def pending(self, project: str) -> dict[str, int]:
        with self._lock:
            return {m.value: len(q) for (p, m), q in self._queues.items() if p == project and q}

    def forget(self, project: str) -> None:
        with self._lock:
            for key in [k for k in self._queues if k[0] == project]:
                del self._queues[key]


class Holds:
    """Calls held at the door until a test releases them: "the next Commit waits",
    so that a test can let another writer in between a transaction's read and its
    commit, deterministically."""

    def __init__(self, limit: float = MAX_HOLD_SECONDS) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._armed: Counter[tuple[str, Method]] = Counter()
        self._waiting: Counter[tuple[str, Method]] = Counter()
        self._gates: dict[str, threading.Event] = {}

    def arm(self, project: str, method: Method, count: int) -> None:
        with self._lock:
            self._armed[project, method] += count
            self._gates.setdefault(project, threading.Event())

    def pause(self, project: str, method: Method) -> None:
        """Wait here if a hold is armed for this call (at most ``limit`` seconds)."""
        with self._lock:
            if not self._armed[project, method]:
                return
            self._armed[project, method] -= 1
            self._waiting[project, method] += 1
            gate = self._gates.setdefault(project, threading.Event())
        gate.wait(self._limit)
        with self._lock:
            self._waiting[project, method] -= 1

    def release(self, project: str) -> None:
        """Let every held call of the project go; holds armed later wait anew."""
        with self._lock:
            gate = self._gates.pop(project, None)
        if gate is not None:
            gate.set()

    def waiting(self, project: str) -> dict[str, int]:
        with self._lock:
            return {m.value: n for (p, m), n in self._waiting.items() if p == project and n}

    def forget(self, project: str) -> None:
        self.release(project)
        with self._lock:
            for counter in (self._armed, self._waiting):
                for key in [k for k in counter if k[0] == project]:
                    del counter[key]


class Stats:
    """Calls per method (failed ones included), failures per method, and the
    number of mutations of every commit, per project."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: Counter[tuple[str, str]] = Counter()
        self._failures: Counter[tuple[str, str]] = Counter()
        self._commits: dict[str, deque[int]] = {}

    def call(self, project: str, method: Method) -> None:
        with self._lock:
            self._calls[project, method.value] += 1

    def failure(self, project: str, method: Method, code: grpc.StatusCode) -> None:
        with self._lock:
            self._failures[project, f"{method.value}:{code.name}"] += 1

    def commit(self, project: str, mutations: int) -> None:
        with self._lock:
            sizes = self._commits.setdefault(project, deque(maxlen=MAX_COMMIT_SIZES))
            sizes.append(mutations)

    def snapshot(self, project: str) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": {m: n for (p, m), n in self._calls.items() if p == project},
                "failures": {m: n for (p, m), n in self._failures.items() if p == project},
                "commit_mutations": list(self._commits.get(project, ())),
            }

    def forget(self, project: str) -> None:
        with self._lock:
            for counter in (self._calls, self._failures):
                for key in [k for k in counter if k[0] == project]:
                    del counter[key]
            self._commits.pop(project, None)
