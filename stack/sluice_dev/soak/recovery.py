"""Time to recover from each fault, and its statistics per kind of fault.

Purely computational: the faults (when each began and when it was over) and the
commits and claims read from the checkpoint store come in; which commit ends each
fault, and p50/max per kind, come out.

Recovery runs from the fault to the *next commit*: the first commit at or after the
moment the fault was over (a dependency healthy again, the operator back) and, for
faults that take the driver away, a commit by a newer driver (a higher epoch), since
the old driver may still commit a batch it had in hand. For those, the claim of the
new driver splits the time in two: fault -> claim (detection, back-off, pod start,
Spark session start) and claim -> commit (the first batch).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sluice_dev.soak.schedule import FaultKind


@dataclass(frozen=True)
class Commit:
    batch_id: int
    epoch: int
    at: float
    """Seconds since the Unix epoch (the driver's ``committed_at``)."""
    records: int = 0


@dataclass(frozen=True)
class Claim:
    epoch: int
    at: float


@dataclass(frozen=True)
class Fault:
    number: int
    kind: FaultKind
    started: float
    """Seconds since the Unix epoch."""
    cleared: float
    """When the fault was over: the server healthy again, the operator back. For a
    fault that takes the driver away, the moment of the fault itself."""
    epoch: int
    """The driver's epoch when the fault began."""
    note: str = ""


@dataclass(frozen=True)
class Recovery:
    fault: Fault
    commit: Commit | None
    claim: Claim | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.commit is None else self.commit.at - self.fault.started

    @property
    def to_claim(self) -> float | None:
        return None if self.claim is None else self.claim.at - self.fault.started

    def line(self) -> str:
        fault = self.fault
        head = f"fault {fault.number:>2} {fault.kind.value:<17}"
        if self.commit is None or self.seconds is None:
            return f"{head} NOT RECOVERED: no qualifying commit ({fault.note})".rstrip()
        parts = [f"next commit after {self.seconds:6.1f}s (batch {self.commit.batch_id}"]
        parts[0] += f", epoch {self.commit.epoch})"
        if fault.cleared > fault.started:
            parts.append(f"over after {fault.cleared - fault.started:.1f}s")
        if self.to_claim is not None:
            parts.append(f"new driver claimed after {self.to_claim:.1f}s")
        if fault.note:
            parts.append(fault.note)
        return f"{head} " + "; ".join(parts)


def recovery(fault: Fault, commits: Iterable[Commit], claims: Iterable[Claim] = ()) -> Recovery:
    """The commit that ends ``fault`` (``None`` if none did yet), and for a fault that
    replaces the driver, the claim of the driver that made it."""
    eligible = [
        c
        for c in commits
        if c.at >= fault.cleared and (not fault.kind.replaces_driver or c.epoch > fault.epoch)
    ]
    commit = min(eligible, key=lambda c: (c.at, c.batch_id), default=None)
    claim = None
    if commit is not None and fault.kind.replaces_driver:
        claim = next((c for c in claims if c.epoch == commit.epoch), None)
    return Recovery(fault, commit, claim)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (``0 < q <= 100``) of non-empty ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class KindStats:
    kind: FaultKind
    count: int
    recovered: int
    p50: float | None
    max: float | None
    claim_p50: float | None
    """Fault -> new driver's claim, p50 (faults that replace the driver)."""

    def line(self) -> str:
        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}s"

        text = (
            f"{self.kind.value:<17} faults {self.count:>2}  recovered {self.recovered:>2}  "
            f"p50 {seconds(self.p50):>7}  max {seconds(self.max):>7}"
        )
        if self.claim_p50 is not None:
            text += f"  (to new driver's claim p50 {seconds(self.claim_p50)})"
        return text


def per_kind(recoveries: Iterable[Recovery]) -> list[KindStats]:
    """p50 and max of the recovery times of each kind of fault, in schedule order."""
    by_kind: dict[FaultKind, list[Recovery]] = {}
    for item in recoveries:
        by_kind.setdefault(item.fault.kind, []).append(item)
    stats = []
    for kind, items in by_kind.items():
        times = [r.seconds for r in items if r.seconds is not None]
        claims = [r.to_claim for r in items if r.to_claim is not None]
        stats.append(
            KindStats(
                kind,
                len(items),
                len(times),
                percentile(times, 50) if times else None,
                max(times) if times else None,
                percentile(claims, 50) if claims else None,
            )
        )
    return stats
