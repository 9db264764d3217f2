"""At which rates the latency phase runs, and whether a contender kept pace (pure).

A latency figure means something only while the system keeps up with what is
produced: a system that falls behind has a latency that grows with the phase's
length, whatever the percentile says. So the latency phase runs at two rates:

* **sustainable**: ``sustained_share`` (0.7) of the slower of Sluice's and Structured
  Streaming's backlog records/s from the throughput phase of the same run (Real-Time
  Mode runs at the rates they set; it sets them only when it runs alone), rounded down to two
  significant digits (3,742 x 0.7 = 2,619 -> 2,600 events/s): a rate both should
  sustain. Skipped when it is not below the target rate (the target then is one);
* **target**: ``--rate`` (5,000 events/s, the issue's target), whichever contender
  keeps up with it or not.

**Fell behind** (reported as *not sustained*, never as a latency figure), either:

1. at the moment the last event was handed to the producer, the events produced so
   far (the priming ones included) exceed the records of the contender's batches that
   had *ended* by then by more than ``behind_triggers`` (5) trigger intervals' worth
   of events at the phase's rate (a trigger interval counting at least 1 s), plus,
   for Real-Time Mode, one batch duration's worth (its rows are written long before
   its batch ends and reports them). A
   system that keeps up is behind by about two intervals at most (the batch being
   read, the batch being written); one that cannot take the rate falls further
   behind every second (at 90 % of the rate, by 7 s' worth over a 70 s phase); or
2. probes (sampled events) still not visible in Cassandra after the drain timeout.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from bench.batches import BatchRecord


def round_down(value: float) -> float:
    """``value`` rounded down to two significant digits (2,619 -> 2,600; 87.4 -> 87)."""
    if value <= 0:
        return 0.0
    step = 10.0 ** max(0, math.floor(math.log10(value)) - 1)
    return float(math.floor(value / step) * step)


def sustainable_rate(
    records_per_second: Iterable[float | None], share: float, target: float
) -> float | None:
    """The sustainable phase's rate: ``share`` of the slowest contender's records/s,
    rounded down; ``None`` when a figure is missing or the rate would not be below
    ``target`` (the target phase covers it)."""
    figures = list(records_per_second)
    if not figures or any(f is None or f <= 0 for f in figures):
        return None
    rate = round_down(share * min(f for f in figures if f is not None))
    return rate if 0 < rate < target else None


@dataclass(frozen=True)
class Pacing:
    """How far behind a contender was when producing ended, and whether that is
    within the allowance."""

    rate: float
    produced: int
    """Events produced in the phase, the priming ones included."""
    processed: int
    """Records of the contender's batches that ended by the end of producing."""
    allowed: float
    """Events the contender may lag by: ``behind_triggers`` intervals' worth."""
    probes_missing: int

    @property
    def lag(self) -> int:
        return max(0, self.produced - self.processed)

    @property
    def lag_seconds(self) -> float:
        return self.lag / self.rate if self.rate > 0 else 0.0

    @property
    def sustained(self) -> bool:
        return self.lag <= self.allowed and self.probes_missing == 0

    @property
    def why_not(self) -> str | None:
        """What made the phase not sustained, for the table; ``None`` if it was."""
        reasons = []
        if self.lag > self.allowed:
            reasons.append(f"{self.lag_seconds:,.1f} s behind")
        if self.probes_missing:
            reasons.append(f"{self.probes_missing:,} probes never seen")
        return ", ".join(reasons) or None


def pacing(
    batches: Iterable[BatchRecord],
    *,
    produced: int,
    produce_ended: float,
    rate: float,
    trigger_seconds: float,
    behind_triggers: float,
    probes_missing: int,
    open_batch_seconds: float = 0.0,
) -> Pacing:
    """Judges a latency phase from the contender's batches (wall-clock ends, epoch
    seconds) and when producing ended (epoch seconds). ``open_batch_seconds``: the
    length of a long-running batch that writes its records before it ends (Real-Time
    Mode's batch duration), whose records count only once it ends: it adds to the
    allowance, as a keeping-up contender is behind by up to one such batch."""
    processed = sum(b.records for b in batches if b.ended <= produce_ended)
    allowed = (behind_triggers * max(trigger_seconds, 1.0) + open_batch_seconds) * rate
    return Pacing(rate, produced, processed, allowed, probes_missing)
