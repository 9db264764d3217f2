"""Summaries of samples: percentiles and throughput windows (pure functions)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), interpolated linearly between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Summary:
    """Distribution of samples, in milliseconds."""

    n: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    p95_ms: float | None = None
    """``None`` in results written before it was measured."""

    @classmethod
    def of_seconds(cls, seconds: Sequence[float]) -> Summary | None:
        """``None`` for no samples."""
        if not seconds:
            return None
        ms = [s * 1000.0 for s in seconds]
        return cls(
            n=len(ms),
            p50_ms=round(percentile(ms, 50), 2),
            p99_ms=round(percentile(ms, 99), 2),
            p95_ms=round(percentile(ms, 95), 2),
            mean_ms=round(sum(ms) / len(ms), 2),
            max_ms=round(max(ms), 2),
        )


@dataclass(frozen=True)
class Window:
    """A span of batches: when the first started, when the last ended, what they held."""

    started: float
    ended: float
    records: int
    batches: int

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Span:
    """One batch's start and end (epoch seconds) and its record count."""

    started: float
    ended: float
    records: int


def window(spans: Sequence[Span], *, skip_first: bool = False) -> Window | None:
    """The window over batches holding records; with ``skip_first`` it starts when the
    first such batch ended and leaves its records out (steady state, no warm-up)."""
    busy = sorted((s for s in spans if s.records > 0), key=lambda s: s.started)
    if skip_first:
        if len(busy) < 2:
            return None
        first, rest = busy[0], busy[1:]
        return Window(first.ended, rest[-1].ended, sum(s.records for s in rest), len(rest))
    if not busy:
        return None
    ended = max(s.ended for s in busy)
    return Window(busy[0].started, ended, sum(s.records for s in busy), len(busy))


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)
