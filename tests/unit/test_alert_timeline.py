"""The alert tests' bookkeeping (sluice_dev.monitoring.timeline and .rules,
tests/support/alert_figures.py): an alert's episodes as an on-call engineer would
tell them from Prometheus's and Alertmanager's lists over time, and the figures table."""

from __future__ import annotations

import pytest

from sluice_dev.monitoring import rules as alert_rules
from sluice_dev.monitoring.timeline import Timeline, still_active
from tests.support.alert_figures import Figure, table

pytestmark = pytest.mark.unit

FAILED = {"alertname": "SluicePipelineFailed", "pipeline": "ns/p", "severity": "critical"}


def test_an_alert_pending_then_firing_then_resolved_is_one_episode() -> None:
    timeline = Timeline()
    timeline.observe(10, [{"labels": FAILED, "state": "pending"}], [])
    timeline.observe(20, [{"labels": FAILED, "state": "firing"}], [{"labels": FAILED}])
    timeline.observe(30, [], [{"labels": FAILED}])
    timeline.observe(40, [], [])
    [episode] = timeline.of("SluicePipelineFailed", "ns/p")
    assert (episode.pending_at, episode.firing_at, episode.quiet_at, episode.resolved_at) == (
        10,
        20,
        30,
        40,
    )
    assert timeline.first_firing("SluicePipelineFailed", "ns/p", after=15) is episode
    assert timeline.first_firing("SluicePipelineFailed", "ns/p", after=25) is None


def test_an_alert_that_fires_again_is_a_second_episode_and_unread_views_change_nothing() -> None:
    timeline = Timeline()
    timeline.observe(1, [{"labels": FAILED}], [{"labels": FAILED}])
    timeline.observe(2, None, None)  # both servers unreachable at that instant
    timeline.observe(3, [], [])
    timeline.observe(4, [{"labels": FAILED}], [{"labels": FAILED}])
    first, second = timeline.of("SluicePipelineFailed", "ns/p")
    assert (first.firing_at, first.resolved_at, second.firing_at) == (1, 3, 4)
    assert second.open


def test_a_dependency_is_part_of_an_alerts_identity() -> None:
    def dependency(name: str) -> dict[str, str]:
        return {"alertname": "SluiceDependencyUnavailable", "pipeline": "ns/p", "dependency": name}

    timeline = Timeline()
    timeline.observe(1, [], [{"labels": dependency("cassandra")}, {"labels": dependency("kafka")}])
    timeline.observe(2, [], [{"labels": dependency("kafka")}])
    cassandra, kafka = timeline.of("SluiceDependencyUnavailable", "ns/p")
    assert (cassandra.resolved_at, kafka.resolved_at) == (2, None)


def test_episodes_touching_a_window_include_pending_ones() -> None:
    timeline = Timeline()
    timeline.observe(5, [{"labels": FAILED, "state": "pending"}], [])
    timeline.observe(6, [], [])
    assert timeline.touching("ns/p", 0, 5.5)
    assert not timeline.touching("ns/p", 7, 100)
    assert not timeline.touching("ns/other", 0, 100)


def test_alertmanager_lists_a_resolved_alert_until_its_end_passes() -> None:
    alerts = [
        {"labels": FAILED, "endsAt": "2026-12-01T10:00:00.000Z"},
        {"labels": FAILED, "endsAt": "2026-12-01T10:05:00.000Z"},
    ]
    at = 1_796_119_500.0  # 2026-12-01T10:05:00Z
    assert still_active(alerts, at - 1) == [alerts[1]]
    assert still_active(alerts, at + 1) == []


def test_figures_report_times_against_the_rules_promise() -> None:
    kept = Figure("SluicePipelineFailed", "ns/p", "4th failure", 100.0, 15.0, "10 s", 110.0)
    kept.cure, kept.cured_at, kept.resolved_at, kept.resolve_promise = "v1", 200.0, 206.0, 15.0
    late = Figure("SluiceOperatorDown", "", "scaled to 0", 0.0, 340.0, "for 5 min", 400.0)
    assert kept.kept
    assert (kept.to_fire, kept.to_resolve) == (10.0, 6.0)
    assert not late.kept
    text = table([kept, late])
    assert "| SluicePipelineFailed | 4th failure | 10 s | ≤ 15 s (10 s) | v1 | 6 s |" in text
    assert "| SluiceOperatorDown | scaled to 0 | 6 min 40 s | ≤ 5 min 40 s" in text


def test_rule_durations_come_from_the_shipped_rules() -> None:
    assert alert_rules.seconds("1h30m") == 5400
    assert alert_rules.seconds("500ms") == 0.5
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        alert_rules.seconds("5 minutes")
    assert alert_rules.for_seconds("SluicePipelineLagGrowing") == 900
    assert alert_rules.for_seconds("SluicePipelineFailed") == 0
    assert alert_rules.severity("SluiceOperatorDown") == "critical"


def test_alertmanagers_own_start_and_end_are_kept_beside_the_polls() -> None:
    firing = {
        "labels": FAILED,
        "startsAt": "2026-12-01T10:00:00Z",
        "endsAt": "2026-12-01T11:00:00Z",
    }
    resolved = {**firing, "endsAt": "2026-12-01T10:05:00Z"}
    timeline = Timeline()
    timeline.observe(1_796_119_203.0, [], [firing])  # 10:00:03, three seconds late
    timeline.observe(1_796_119_510.0, [], [resolved])  # 10:05:10, listed until endsAt passed
    [episode] = timeline.of("SluicePipelineFailed", "ns/p")
    assert (episode.starts_at, episode.firing_at) == (1_796_119_200.0, 1_796_119_203.0)
    assert (episode.ends_at, episode.resolved_at) == (1_796_119_500.0, 1_796_119_510.0)
