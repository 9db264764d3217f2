"""Operator metrics, defined once per process with fixed label sets.

Counted from the decisions reconciles make: reconciles, driver starts, restarts,
failovers (node lost), fencing, upgrades and their duration (clean stop requested →
new driver running), and pipelines by phase.

The ``sluice_operator_pipeline_*`` series carry ``pipeline="<namespace>/<name>"``, the
label the driver's own metrics carry, so an alert joins them ``on (pipeline)``: the
phase (one series per phase, 1 for the current one, as kube-state-metrics does), the
restart count and epoch from the status, the trigger interval from the spec (the
"not committing" alert scales with it) and lifecycle transitions per reason. They are
set by the replica that leads (the only one that reconciles) and removed once a
deleted pipeline is gone. ``record`` is the one entry point, called by ``reconcile``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from sluice_api import metrics as names
from sluice_operator.actions import Decision, Emit, WriteStatus
from sluice_operator.model import Observed, Phase, Status

RECONCILES: Final = Counter("sluice_operator_reconciles_total", "Reconciles of pipelines.")
PIPELINES: Final = Gauge("sluice_operator_pipelines", "Pipelines by phase.", ["phase"])
EVENTS: Final = Counter(
    "sluice_operator_transitions_total",
    "Lifecycle transitions (DriverCreated, DriverFailed, NodeLost, Fenced, Upgrading, ...).",
    ["reason"],
)
UPGRADE_SECONDS: Final = Histogram(
    "sluice_operator_upgrade_duration_seconds",
    "From the clean stop of the old driver (a warm handover: the standby's creation) to the "
    "new driver running.",
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)

PIPELINE: Final = ("pipeline",)
PIPELINE_PHASE: Final = Gauge(
    names.OPERATOR_PIPELINE_PHASE,
    "1 for the pipeline's current lifecycle phase, 0 for every other phase.",
    ("pipeline", "phase"),
)
PIPELINE_TRANSITIONS: Final = Counter(
    names.OPERATOR_PIPELINE_TRANSITIONS,
    "Lifecycle transitions of one pipeline (DriverFailed, Fenced, NodeLost, Upgrading, ...).",
    ("pipeline", "reason"),
)
PIPELINE_RESTARTS: Final = Gauge(
    names.OPERATOR_PIPELINE_RESTARTS,
    "Driver pods restarted after a failure, fencing or node loss (status.restarts).",
    PIPELINE,
)
PIPELINE_EPOCH: Final = Gauge(
    names.OPERATOR_PIPELINE_EPOCH, "Epoch of the pipeline's current driver.", PIPELINE
)
PIPELINE_TRIGGER: Final = Gauge(
    names.OPERATOR_PIPELINE_TRIGGER,
    "spec.trigger.intervalSeconds: seconds between micro-batch starts.",
    PIPELINE,
)

INITIAL_REASONS: Final = ("DriverCreated", "DriverFailed", "Fenced", "NodeLost", "Upgrading")
"""Transitions published at 0 as soon as a pipeline is seen, so that ``increase()`` over
them counts the first one too (a series born at 1 has no increase)."""

_lock = threading.Lock()
_phases: dict[str, Phase] = {}
_reasons: dict[str, set[str]] = {}
_upgrade_started: dict[str, float] = {}


def record(observed: Observed, decision: Decision) -> None:
    """Update every metric from one reconcile's observation and decision."""
    key = f"{observed.namespace}/{observed.name}"
    RECONCILES.inc()
    with _lock:
        for action in decision.actions:
            if isinstance(action, Emit):
                _transition(key, action.reason)
        if decision.finished:
            _forget(key)
        else:
            _publish(key, observed, _status_after(observed, decision))
        for phase in Phase:
            PIPELINES.labels(phase.value).set(sum(1 for p in _phases.values() if p is phase))


def _status_after(observed: Observed, decision: Decision) -> Status:
    written = [a.status for a in decision.actions if isinstance(a, WriteStatus)]
    return written[-1] if written else observed.status


def _transition(key: str, reason: str) -> None:
    EVENTS.labels(reason).inc()
    _series(key)
    PIPELINE_TRANSITIONS.labels(key, reason).inc()
    _reasons[key].add(reason)
    if reason in ("Upgrading", "StandbyCreated"):  # a clean stop's, a warm handover's
        _upgrade_started[key] = time.monotonic()
    if reason == "UpgradeFailed":  # the old driver goes on: no upgrade to time
        _upgrade_started.pop(key, None)
    if reason == "Running" and key in _upgrade_started:
        UPGRADE_SECONDS.observe(time.monotonic() - _upgrade_started.pop(key))


def _series(key: str) -> None:
    """Create a newly seen pipeline's transition counters at 0."""
    if key in _reasons:
        return
    _reasons[key] = set(INITIAL_REASONS)
    for reason in INITIAL_REASONS:
        PIPELINE_TRANSITIONS.labels(key, reason)


def _publish(key: str, observed: Observed, status: Status) -> None:
    _series(key)
    _phases[key] = status.phase
    for phase in Phase:
        PIPELINE_PHASE.labels(key, phase.value).set(1 if phase is status.phase else 0)
    PIPELINE_RESTARTS.labels(key).set(status.restarts)
    PIPELINE_EPOCH.labels(key).set(status.epoch)
    if observed.spec is not None:
        PIPELINE_TRIGGER.labels(key).set(observed.spec.trigger.interval_seconds)


def _forget(key: str) -> None:
    """A deleted pipeline's series go: a gone pipeline is neither Failed nor stuck."""
    _phases.pop(key, None)
    _upgrade_started.pop(key, None)
    for phase in Phase:
        _remove(PIPELINE_PHASE, key, phase.value)
    for reason in _reasons.pop(key, set()):
        _remove(PIPELINE_TRANSITIONS, key, reason)
    for gauge in (PIPELINE_RESTARTS, PIPELINE_EPOCH, PIPELINE_TRIGGER):
        _remove(gauge, key)


def _remove(metric: Gauge | Counter, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never published (e.g. a spec that never parsed)
        metric.remove(*labels)
