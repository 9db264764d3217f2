"""``make demo-alerts`` tells each fault as a timeline and fails on an alert its faults
do not explain (sluice_dev.demoalerts): the pure parts, on hand-made episodes."""

from __future__ import annotations

import pytest

from sluice_dev import demoalerts
from sluice_dev.demoalerts import Fault, timeline, unexpected
from sluice_dev.monitoring import rules
from sluice_dev.monitoring.timeline import Episode

pytestmark = pytest.mark.unit

PIPELINE = "sluice-demo/page-kpis"


def episode(name: str, dependency: str = "", **times: float) -> Episode:
    labels = {"alertname": name, "pipeline": PIPELINE}
    if dependency:
        labels["dependency"] = dependency
    return Episode((name, PIPELINE, dependency), labels, **times)


def test_a_faults_timeline_is_every_moment_in_order_in_seconds_after_the_fault() -> None:
    fault = Fault("Cassandra stopped", at=1000.0, steps=[(1150.0, "Cassandra started")])
    fault.alerts.append(
        episode(
            demoalerts.UNAVAILABLE,
            "cassandra",
            pending_at=1010.0,
            starts_at=1130.0,
            firing_at=1130.4,
            ends_at=1165.0,
            resolved_at=1166.0,
        )
    )
    lines = timeline(fault)
    assert [line.split("s  ", 1)[1] for line in lines] == [
        "Cassandra stopped",
        "SluiceDependencyUnavailable pending in Prometheus",
        "SluiceDependencyUnavailable firing (its for: 120 s over)",
        "SluiceDependencyUnavailable listed by Alertmanager's /api/v2/alerts",
        "Cassandra started",
        "SluiceDependencyUnavailable resolved by Prometheus",
        "SluiceDependencyUnavailable gone from Alertmanager",
    ]
    assert lines[0].strip().startswith("+   0.0 s")
    assert lines[2].strip().startswith("+ 130.0 s")


def test_an_alert_without_for_is_never_pending_nor_resolved_while_it_fires() -> None:
    """SluiceDriverFenced has no ``for:``: Prometheus lists it firing at once (the watch
    sees it a second after Alertmanager's startsAt), and the demo does not wait for
    its 15-minute window to resolve it."""
    fault = Fault("node lost", at=50.0, steps=[(58.0, "epoch 3 Running")])
    fault.alerts.append(episode(demoalerts.FENCED, pending_at=66.9, starts_at=65.0, firing_at=66.0))
    texts = " / ".join(timeline(fault))
    assert "firing (its for: 0 s over)" in texts
    assert "pending" not in texts
    assert "resolved" not in texts
    assert "gone" not in texts


def test_an_alert_in_alertmanager_that_no_fault_explains_is_a_false_positive() -> None:
    fenced = episode(demoalerts.FENCED, firing_at=10.0)
    other_dependency = episode(demoalerts.UNAVAILABLE, "kafka", firing_at=20.0)
    only_pending = episode("SluiceUpgradeStuck", pending_at=30.0)
    down = Episode(("SluiceOperatorDown", "", ""), {"alertname": "SluiceOperatorDown"}, firing_at=5)
    expected = [(demoalerts.FENCED, PIPELINE, ""), (demoalerts.UNAVAILABLE, PIPELINE, "cassandra")]
    assert unexpected([fenced, other_dependency, only_pending, down], expected) == [
        other_dependency,
        down,
    ]


def test_the_demo_turns_on_the_charts_driver_monitor_and_rules_for_its_namespace() -> None:
    values = demoalerts.chart_values("sluice-demo")
    assert "watchNamespaces={sluice-demo}" in values
    assert "metrics.podMonitor.enabled=true" in values
    assert "prometheusRule.enabled=true" in values
    scrape = demoalerts.operator_scrape("sluice-demo", 18090)
    # The job the shipped rules read the operator under, or SluiceOperatorDown fires.
    operator_down = rules.rules()["SluiceOperatorDown"]["expr"]
    assert f'job="{scrape["spec"]["jobName"]}"' in operator_down
    assert scrape["spec"]["staticConfigs"] == [{"targets": ["127.0.0.1:18090"]}]
