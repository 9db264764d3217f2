"""Provisioning every artifact at once: downloads overlap with builds.

A cold machine spends its provisioning time in two different ways: fetching jars from
Maven Central (network-bound) and compiling Go modules (CPU-bound). Done one after
another they add up; here they overlap. Maven artifacts go one at a time in their own
lane (parallel ``mvn`` runs would share one unlocked ``~/.m2``); every Go module
downloads its dependencies up front, all at once, and compiles in one of a few build
slots, longest first. Each artifact prints a line when it starts and when it ends,
with a running count and the time since provisioning began.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from sluice_dev.artifacts import Artifact, Outcome, ensure
from sluice_dev.paths import Layout

Say = Callable[[str], None]


def build_slots() -> int:
    """How many compilers run at once: two on a small machine, more on a larger one."""
    return max(2, (os.cpu_count() or 2) // 2)


class _Progress:
    """Thread-safe start and end lines with a running total."""

    def __init__(self, total: int, say: Say) -> None:
        self._total = total
        self._done = 0
        self._say = say
        self._lock = threading.Lock()
        self._began = time.monotonic()

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self._began:6.1f}s]"

    def started(self, artifact: Artifact) -> None:
        with self._lock:
            self._say(f"{self._stamp()} {artifact.name:<12} {artifact.version:<10} started")

    def ended(self, outcome: Outcome) -> None:
        with self._lock:
            self._done += 1
            self._say(f"{self._stamp()} {outcome.line()}  ({self._done}/{self._total} done)")


def provision_all(artifacts: Sequence[Artifact], layout: Layout, say: Say = print) -> list[Outcome]:
    """Ensure every artifact; returns their outcomes in the order given.

    The first failure is raised once every running build has ended.
    """
    progress = _Progress(len(artifacts), say)
    missing = [a for a in artifacts if not a.ready(layout)]
    cached = {a.name: _cached(a, layout, progress) for a in artifacts if a not in missing}
    slots = threading.Semaphore(build_slots())
    compiled = [a for a in missing if a.compiles]
    fetched = [a for a in missing if not a.compiles]
    # A thread per download, per build (most wait on a slot) and for the Maven lane.
    with ThreadPoolExecutor(max_workers=2 * len(compiled) + 1) as pool:
        prefetches = {a.name: pool.submit(_prefetch, a) for a in compiled}
        futures: dict[str, Future[Outcome]] = {
            a.name: pool.submit(_compile, a, layout, prefetches[a.name], slots, progress)
            for a in compiled
        }
        lane = pool.submit(_one_after_another, fetched, layout, progress)
        outcomes = dict(cached)
        for name, future in futures.items():
            outcomes[name] = future.result()
        outcomes.update(lane.result())
    return [outcomes[a.name] for a in artifacts]


def _cached(artifact: Artifact, layout: Layout, progress: _Progress) -> Outcome:
    outcome = ensure(artifact, layout)
    progress.ended(outcome)
    return outcome


def _prefetch(artifact: Artifact) -> None:
    if artifact.prefetch is not None:
        artifact.prefetch()


def _compile(
    artifact: Artifact,
    layout: Layout,
    downloaded: Future[None],
    slots: threading.Semaphore,
    progress: _Progress,
) -> Outcome:
    downloaded.result()
    with slots:
        progress.started(artifact)
        outcome = ensure(artifact, layout)
    progress.ended(outcome)
    return outcome


def _one_after_another(
    artifacts: Sequence[Artifact], layout: Layout, progress: _Progress
) -> dict[str, Outcome]:
    outcomes = {}
    for artifact in artifacts:
        progress.started(artifact)
        outcomes[artifact.name] = ensure(artifact, layout)
        progress.ended(outcomes[artifact.name])
    return outcomes
