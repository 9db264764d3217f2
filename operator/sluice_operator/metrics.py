"""Operator metrics, defined once per process with fixed label sets.

Counted from the decisions reconciles make: reconciles, driver starts, restarts,
failovers (node lost), fencing, upgrades and their duration (clean stop requested →
new driver running), and pipelines by phase.
"""

from __future__ import annotations

import time
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from sluice_operator.actions import Decision, Emit, WriteStatus
from sluice_operator.model import Observed, Phase

RECONCILES: Final = Counter("sluice_operator_reconciles_total", "Reconciles of pipelines.")
PIPELINES: Final = Gauge("sluice_operator_pipelines", "Pipelines by phase.", ["phase"])
EVENTS: Final = Counter(
    "sluice_operator_transitions_total",
    "Lifecycle transitions (DriverCreated, DriverFailed, NodeLost, Fenced, Upgrading, ...).",
    ["reason"],
)
UPGRADE_SECONDS: Final = Histogram(
    "sluice_operator_upgrade_duration_seconds",
    "From the clean stop of the old driver to the new driver running.",
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)

_phases: dict[str, Phase] = {}
_upgrade_started: dict[str, float] = {}


def record(observed: Observed, decision: Decision) -> None:
    key = f"{observed.namespace}/{observed.name}"
    RECONCILES.inc()
    for action in decision.actions:
        if isinstance(action, Emit):
            EVENTS.labels(action.reason).inc()
            if action.reason == "Upgrading":
                _upgrade_started[key] = time.monotonic()
            if action.reason == "Running" and key in _upgrade_started:
                UPGRADE_SECONDS.observe(time.monotonic() - _upgrade_started.pop(key))
    if decision.finished:
        _phases.pop(key, None)
    else:
        written = [a.status.phase for a in decision.actions if isinstance(a, WriteStatus)]
        _phases[key] = written[-1] if written else observed.status.phase
    for phase in Phase:
        PIPELINES.labels(phase.value).set(sum(1 for p in _phases.values() if p is phase))
