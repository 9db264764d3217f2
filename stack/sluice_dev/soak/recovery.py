"""Time to recover from each fault, and its statistics per kind of fault.

Purely computational: the faults (when each began and when it was over) and the
commits and claims read from the checkpoint store come in; which commit ends each
fault, and p50/max per kind, come out.

Recovery runs from the fault to the *next commit*: the first commit at or after the
moment the fault was over (a dependency healthy again, the operator back) and, for
faults that take the driver away, a commit by a newer driver (a higher epoch). For
those, the old driver may go on committing after the fault: a batch it had in hand,
a warm handover's driver until its successor is ready, a partitioned node's driver
(cut off the API only) until it is fenced. So their recovery time is the pipeline's
stall: from the later of the fault and the old driver's last commit before the new
driver's first, to that first commit (the time no commit was made because of the
fault). The time from the fault to the new driver's first commit is kept beside it
(``replaced``), and the new driver's claim splits that in two: fault -> claim
(detection, back-off, pod start, Spark session start) and claim -> commit.
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
    load: float | None = None
    """The machine's 1-minute load average, the highest sampled from the fault to its
    next commit: a slow recovery on a busy machine is read against it."""


@dataclass(frozen=True)
class Recovery:
    fault: Fault
    commit: Commit | None
    claim: Claim | None = None
    stalled_from: float | None = None
    """A fault that replaced the driver: the later of the fault and the old driver's
    last commit before ``commit``; ``None`` for the others (the fault's start)."""

    @property
    def seconds(self) -> float | None:
        """Seconds without a commit because of the fault (see the module)."""
        if self.commit is None:
            return None
        since = self.fault.started if self.stalled_from is None else self.stalled_from
        return self.commit.at - since

    @property
    def replaced(self) -> float | None:
        """A fault that replaced the driver: seconds from it to the new driver's first
        commit."""
        if self.commit is None or self.stalled_from is None:
            return None
        return self.commit.at - self.fault.started

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
        if self.replaced is not None and self.replaced - self.seconds > 0.05:
            parts.append(f"new driver's first commit {self.replaced:.1f}s after the fault")
        if self.to_claim is not None:
            parts.append(f"new driver claimed after {self.to_claim:.1f}s")
        if fault.load is not None:
            parts.append(f"load {fault.load:.1f}")
        if fault.note:
            parts.append(fault.note)
        return f"{head} " + "; ".join(parts)


def recovery(fault: Fault, commits: Iterable[Commit], claims: Iterable[Claim] = ()) -> Recovery:
    """The commit that ends ``fault`` (``None`` if none did yet), and for a fault that
    replaces the driver, the claim of the driver that made it."""
    commits = list(commits)  # read twice: the commit that ends the fault, the one before
    eligible = [
        c
        for c in commits
        if c.at >= fault.cleared and (not fault.kind.replaces_driver or c.epoch > fault.epoch)
    ]
    commit = min(eligible, key=lambda c: (c.at, c.batch_id), default=None)
    if commit is None or not fault.kind.replaces_driver:
        return Recovery(fault, commit)
    claim = next((c for c in claims if c.epoch == commit.epoch), None)
    before = [c.at for c in commits if c.epoch < commit.epoch and c.at <= commit.at]
    return Recovery(fault, commit, claim, max([fault.started, *before]))


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
    load_p50: float | None = None
    """The load average during the faults (each fault's highest), p50."""

    def line(self) -> str:
        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}s"

        text = (
            f"{self.kind.value:<17} faults {self.count:>2}  recovered {self.recovered:>2}  "
            f"p50 {seconds(self.p50):>7}  max {seconds(self.max):>7}"
        )
        if self.claim_p50 is not None:
            text += f"  (to new driver's claim p50 {seconds(self.claim_p50)})"
        if self.load_p50 is not None:
            text += f"  load p50 {self.load_p50:.1f}"
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
        loads = [r.fault.load for r in items if r.fault.load is not None]
        stats.append(
            KindStats(
                kind,
                len(items),
                len(times),
                percentile(times, 50) if times else None,
                max(times) if times else None,
                percentile(claims, 50) if claims else None,
                percentile(loads, 50) if loads else None,
            )
        )
    return stats
