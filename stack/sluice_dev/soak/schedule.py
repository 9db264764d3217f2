"""The seeded fault schedule: which faults happen, in which order, and when.

A purely computational module: the same seed gives the same schedule, so a soak
that found a problem can be run again with the same faults in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class FaultKind(StrEnum):
    POD_DELETE = "pod-delete"
    """The driver pod force-deleted (``--force --grace-period=0``)."""
    DRIVER_KILL = "driver-kill"
    """The driver process SIGKILLed."""
    OPERATOR_KILL = "operator-kill"
    """The operator process SIGKILLed, then started again."""
    CASSANDRA_STOP = "cassandra-stop"
    """Cassandra stopped for a while, then started with its data."""
    KAFKA_RESTART = "kafka-restart"
    """The Kafka broker stopped and started again."""
    APISERVER_RESTART = "apiserver-restart"
    """kube-apiserver stopped and started again."""
    NODE_PARTITION = "node-partition"
    """The driver's node cut off the API (its driver keeps running), healed after."""
    NODE_CRASH = "node-crash"
    """The driver's node crashed (its pods' processes killed, its heartbeats stopped),
    back after."""
    SPEC_CHANGE = "spec-change"
    """A new image applied: a clean-stop upgrade."""

    @property
    def replaces_driver(self) -> bool:
        """True if recovery needs a new driver (a newer epoch) to commit."""
        return self in REPLACES_DRIVER


REPLACES_DRIVER = frozenset(
    {
        FaultKind.POD_DELETE,
        FaultKind.DRIVER_KILL,
        FaultKind.NODE_PARTITION,
        FaultKind.NODE_CRASH,
        FaultKind.SPEC_CHANGE,
    }
)
FAULT_KINDS: tuple[FaultKind, ...] = tuple(k for k in FaultKind if k is not FaultKind.SPEC_CHANGE)
"""Every kind of fault (spec changes are scheduled apart, by count)."""


@dataclass(frozen=True)
class Step:
    """One scheduled disturbance: its place in the run and when it is due."""

    number: int
    kind: FaultKind
    due: float
    """Seconds after production started; a step never starts before the previous one
    has recovered, so a slow recovery pushes the later steps back."""


def plan(
    seed: int,
    faults: int,
    *,
    spec_changes: int = 2,
    kinds: Sequence[FaultKind] = FAULT_KINDS,
    duration: float,
) -> list[Step]:
    """``faults`` faults drawn from ``kinds`` (each kind at least once when there are
    enough faults, the rest drawn at random), mixed with ``spec_changes`` spec
    changes, spread evenly over ``duration`` seconds with a seeded jitter."""
    rng = random.Random(seed)
    chosen = [kinds[i % len(kinds)] for i in range(min(faults, len(kinds)))]
    chosen += [rng.choice(kinds) for _ in range(faults - len(chosen))]
    chosen += [FaultKind.SPEC_CHANGE] * spec_changes
    rng.shuffle(chosen)
    return [
        Step(number, kind, due)
        for number, (kind, due) in enumerate(
            zip(chosen, due_times(rng, len(chosen), duration), strict=True), start=1
        )
    ]


def due_times(rng: random.Random, steps: int, duration: float) -> list[float]:
    """``steps`` increasing times in ``(0, duration)``: evenly spaced, each moved by
    up to a quarter of the spacing either way."""
    spacing = duration / (steps + 1)
    return [spacing * (i + 1) + rng.uniform(-spacing / 4, spacing / 4) for i in range(steps)]
