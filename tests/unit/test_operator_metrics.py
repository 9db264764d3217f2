"""The operator's metrics as Prometheus would scrape them, after reconciles decided by
the real lifecycle rules: per-pipeline phase, transitions, restarts, epoch and trigger
interval (what the alerts in charts/sluice/files/alerts.yaml read), and the
pre-existing unlabelled series, which keep their names."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY, generate_latest

from sluice_operator import metrics, naming
from sluice_operator.actions import Decision
from sluice_operator.decide import decide
from sluice_operator.model import Observed, Phase, PodPhase, PodView, Status
from tests.support.observations import NOW, observed

pytestmark = pytest.mark.unit


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


class Pipeline:
    """One pipeline of its own (a fresh namespace), reconciled step by step."""

    def __init__(self) -> None:
        self.namespace = f"ns-{uuid.uuid4().hex[:8]}"
        self.key = f"{self.namespace}/kpis"
        self.status = Status()

    def observe(self, *pods: PodView, deleting: bool = False) -> Observed:
        return observed(self.status, pods, namespace=self.namespace, nodes={}, deleting=deleting)

    def reconcile(self, *pods: PodView, deleting: bool = False) -> Decision:
        """What ``reconcile`` does, minus the API: decide, then record."""
        observed = self.observe(*pods, deleting=deleting)
        decision = decide(observed)
        metrics.record(observed, decision)
        self.status = metrics._status_after(observed, decision)
        return decision

    def driver(self, phase: PodPhase, exit_code: int | None = None) -> PodView:
        return PodView(
            naming.driver_pod("kpis", self.status.epoch),
            self.status.epoch,
            phase,
            exit_code=exit_code,
            running_since=NOW - timedelta(seconds=1),
            finished_at=NOW if exit_code is not None else None,
        )

    def phase(self, phase: Phase) -> float | None:
        return value("sluice_operator_pipeline_phase", pipeline=self.key, phase=phase.value)

    def transitions(self, reason: str) -> float | None:
        return value("sluice_operator_pipeline_transitions_total", pipeline=self.key, reason=reason)


def test_a_started_pipeline_shows_its_phase_epoch_and_trigger_interval() -> None:
    pipeline = Pipeline()
    pipeline.reconcile()
    assert pipeline.phase(Phase.STARTING) == 1
    assert [pipeline.phase(p) for p in Phase].count(0) == len(Phase) - 1
    assert value("sluice_operator_pipeline_epoch", pipeline=pipeline.key) == 1
    assert value("sluice_operator_pipeline_trigger_interval_seconds", pipeline=pipeline.key) == 7
    assert pipeline.transitions("DriverCreated") == 1
    pipeline.reconcile(pipeline.driver(PodPhase.RUNNING))
    assert pipeline.phase(Phase.RUNNING) == 1
    assert pipeline.phase(Phase.STARTING) == 0


def test_transitions_an_alert_counts_start_at_zero() -> None:
    """``increase()`` needs a sample before the first failure to count it."""
    pipeline = Pipeline()
    pipeline.reconcile()
    for reason in ("DriverFailed", "Fenced", "NodeLost", "Upgrading"):
        assert pipeline.transitions(reason) == 0, reason


def test_a_failing_driver_counts_failures_and_restarts_until_failed() -> None:
    pipeline = Pipeline()
    pipeline.reconcile()
    for attempt in range(1, 4):
        pipeline.reconcile(pipeline.driver(PodPhase.FAILED, exit_code=1))
        assert pipeline.transitions("DriverFailed") == min(attempt, 2)
        pipeline.status = replace(pipeline.status, next_start_at=None)
        if attempt < 3:
            pipeline.reconcile()  # the back-off is over: the next epoch starts
    assert value("sluice_operator_pipeline_restarts", pipeline=pipeline.key) == 2
    assert pipeline.transitions("Failed") == 1
    assert pipeline.phase(Phase.FAILED) == 1


def test_a_fenced_driver_counts_a_fencing_transition() -> None:
    pipeline = Pipeline()
    pipeline.reconcile()
    pipeline.reconcile(pipeline.driver(PodPhase.FAILED, exit_code=3))
    assert pipeline.transitions("Fenced") == 1
    assert value("sluice_operator_pipeline_epoch", pipeline=pipeline.key) == 2
    assert pipeline.phase(Phase.RECOVERING) == 1


def test_an_upgrade_shows_the_upgrading_phase_then_its_duration() -> None:
    pipeline = Pipeline()
    pipeline.reconcile()
    pipeline.reconcile(pipeline.driver(PodPhase.RUNNING))
    upgrades = value("sluice_operator_upgrade_duration_seconds_count") or 0.0
    pipeline.status = replace(pipeline.status, spec_hash="older")
    pipeline.reconcile(pipeline.driver(PodPhase.RUNNING))
    assert pipeline.phase(Phase.UPGRADING) == 1
    assert pipeline.transitions("Upgrading") == 1
    pipeline.reconcile(pipeline.driver(PodPhase.SUCCEEDED, exit_code=0))
    pipeline.reconcile(pipeline.driver(PodPhase.RUNNING))
    assert pipeline.phase(Phase.RUNNING) == 1
    assert value("sluice_operator_upgrade_duration_seconds_count") == upgrades + 1


def test_a_deleted_pipeline_leaves_no_series() -> None:
    pipeline = Pipeline()
    pipeline.reconcile()
    assert pipeline.reconcile(deleting=True).finished
    scraped = generate_latest().decode()
    assert pipeline.key not in scraped


def test_the_unlabelled_series_keep_their_names_and_count_pipelines_by_phase() -> None:
    before = value("sluice_operator_pipelines", phase="Starting") or 0.0
    reconciles = value("sluice_operator_reconciles_total") or 0.0
    failed = value("sluice_operator_transitions_total", reason="DriverCreated") or 0.0
    Pipeline().reconcile()
    assert value("sluice_operator_pipelines", phase="Starting") == before + 1
    assert value("sluice_operator_reconciles_total") == reconciles + 1
    assert value("sluice_operator_transitions_total", reason="DriverCreated") == failed + 1
