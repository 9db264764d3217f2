"""Backpressure: the per-partition cap of the next batch, from how long recent ones took.

A purely computational module with no side effects; the runner feeds it one
:class:`Observation` per batch and plans the next batch with :attr:`Estimate.cap`.

The model: a batch whose largest partition range holds ``x`` records takes about
``a + b * x`` seconds (``a``: per-batch cost such as scheduling and the commit;
``b``: seconds per record of a partition). The aim is ``a + b * x = target``, a
fraction of the trigger interval, so batches keep pace with the trigger and leave
room for bursts; hence ``x = (target - a) / b``.

While the recent batches are of similar size, ``a`` cannot be told from ``b``
(noise in the batch times dominates a least-squares fit), so the latest batch's
time is taken as proportional to its records: ``x' = target * x / seconds``. That
step never overshoots the ideal cap from either side, and repeated it converges
to it (geometrically, by the factor ``a / target`` per batch). Once the last
:data:`WINDOW` batches differ in size by :data:`SPREAD`, ``a`` and ``b`` come from
a least-squares fit, which also tells when ``a`` alone exceeds the target: then no
cap can meet it, larger batches drain a backlog fastest, and the cap grows back to
the maximum instead of starving the pipeline.

The latest batch has the final say on the direction: one over target (by more
than :data:`TOLERANCE`, so that rounding to whole records does not make the cap
flap) never grows the cap, one on time never shrinks it, and one on time that was
not limited by the cap (the backlog was smaller) leaves it alone, as it says
nothing about larger batches. Growth is at most :data:`MAX_GROWTH` times per batch,
aims at the target (rounded up unless that is predicted to be over it), and is at
least one record while the fit is proportional, so that a small cap is never stuck
by rounding. Shrinking is immediate. The cap stays within
``[1, max_records_per_partition]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

WINDOW: Final = 8
MAX_GROWTH: Final = 2.0
TOLERANCE: Final = 0.05
"""A batch up to this fraction over the target still counts as on time."""
SPREAD: Final = 1.5
"""Batch sizes must differ by this factor before ``a`` and ``b`` are told apart."""


@dataclass(frozen=True)
class RateControl:
    target_seconds: float
    max_cap: int

    @classmethod
    def of(cls, utilization: float, interval: float, max_cap: int) -> RateControl:
        return cls(utilization * interval, max_cap)


@dataclass(frozen=True)
class Observation:
    """One executed batch: the records of its largest partition range, how long it
    took (read to commit) and whether that range was cut short by the cap."""

    records: int
    seconds: float
    capped: bool


@dataclass(frozen=True)
class Model:
    """Batch seconds ≈ ``overhead + per_record * records``; ``separated`` says whether
    the two were told apart (else ``overhead`` is 0 and ``per_record`` includes it)."""

    overhead: float
    per_record: float
    separated: bool = False

    def seconds(self, records: int) -> float:
        return self.overhead + self.per_record * records

    def fitting(self, target: float) -> float | None:
        """Records per partition that take ``target`` seconds; ``None`` if none do."""
        if self.overhead >= target:
            return None
        return (target - self.overhead) / self.per_record


@dataclass(frozen=True)
class Estimate:
    cap: int
    history: tuple[Observation, ...] = ()

    def observe(self, seen: Observation, control: RateControl) -> Estimate:
        """The estimate after ``seen``; observations without records are ignored."""
        if seen.records <= 0:
            return self
        history = (*self.history, seen)[-WINDOW:]
        return Estimate(next_cap(self.cap, history, control), history)


def next_cap(cap: int, history: Sequence[Observation], control: RateControl) -> int:
    """The cap after ``history`` (oldest first, non-empty, records > 0)."""
    last, target = history[-1], control.target_seconds
    on_time = last.seconds <= target * (1 + TOLERANCE)
    if on_time and not last.capped:
        return _clamp(cap, control)
    model = fit(history)
    ideal = model.fitting(target)
    if ideal is None:  # per-batch cost alone exceeds the target
        return _clamp(_grown(cap), control)
    if not on_time:
        return _clamp(min(cap, math.floor(ideal)), control)
    aim = math.ceil(ideal)
    if model.seconds(aim) > target * (1 + TOLERANCE):
        aim = math.floor(ideal)
    if aim <= cap and not model.separated and last.seconds < target:
        aim = cap + 1
    return _clamp(max(cap, min(aim, _grown(cap))), control)


def fit(history: Sequence[Observation]) -> Model:
    """Least squares of seconds over records; proportional to the latest batch when
    the records of the window are too alike (or the fit is not physical)."""
    xs = [float(o.records) for o in history]
    ds = [max(0.0, o.seconds) for o in history]
    proportional = Model(0.0, max(ds[-1], 1e-9) / xs[-1])
    if max(xs) < SPREAD * min(xs):
        return proportional
    mean_x, mean_d = sum(xs) / len(xs), sum(ds) / len(ds)
    variance = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (d - mean_d) for x, d in zip(xs, ds, strict=True)) / variance
    overhead = mean_d - slope * mean_x
    if slope <= 0 or overhead < 0:
        return proportional
    return Model(overhead, slope, separated=True)


def _grown(cap: int) -> int:
    return math.ceil(cap * MAX_GROWTH)


def _clamp(cap: int, control: RateControl) -> int:
    return max(1, min(control.max_cap, cap))
