"""The demo's pure parts: the example pointed at the local stack, and its oracle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml

from sluice_api.spec import PipelineSpec
from sluice_dev import demo, demonodes
from sluice_dev.events import EventFactory
from sluice_operator import builders

pytestmark = pytest.mark.unit


def test_the_localized_example_is_a_valid_pipeline_on_the_stack() -> None:
    example = yaml.safe_load(demo.EXAMPLE.read_text())
    body = demo.localized(example, "ui-events-1", "ui-events-dlq-1", "sluice-demo/job:v2")
    spec = PipelineSpec.model_validate(body["spec"])
    assert body["metadata"] == {"name": demo.PIPELINE, "namespace": demo.NAMESPACE}
    assert spec.image == "sluice-demo/job:v2"
    assert spec.source.kafka.topics == ["ui-events-1"]
    assert spec.transform.entrypoint == example["spec"]["transform"]["entrypoint"]
    assert spec.sink.cassandra is not None
    assert spec.sink.cassandra.keyspace == demo.KEYSPACE
    assert example["metadata"]["namespace"] == "analytics", "the example itself is untouched"


def test_expected_kpis_count_every_event_once_in_its_minute() -> None:
    factory = EventFactory(seed=3)
    kpis = demo.expected_kpis(factory, 500)
    assert sum(kpis.values()) == 500
    assert all(start % 60 == 0 for _, start in kpis)
    assert all(page == page.lower() and "?" not in page for page, _ in kpis)


def test_the_demo_points_curl_at_the_driver_pods_own_ip() -> None:
    """Each pod has its own loopback address on the node agent; the driver's metrics
    server listens on it, not on 127.0.0.1."""
    pod = {"metadata": {"name": "page-kpis-3"}, "status": {"podIP": "127.41.7.9"}}
    assert demo.driver_metrics_url(pod) == "http://127.41.7.9:8090/metrics"
    assert demo.DRIVER_METRICS_PORT == builders.METRICS_PORT
    assert "<the driver pod's IP>" in demo.driver_metrics_url({"status": {}})


def test_the_demo_upgrades_by_warm_handover_and_measures_the_gap_from_the_history() -> None:
    example = yaml.safe_load(demo.EXAMPLE.read_text())
    spec = PipelineSpec.model_validate(demo.localized(example, "t", "d", "i:v2")["spec"])
    assert spec.upgrade.mode.value == "WarmHandover"
    at = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    commits = [(1, at), (2, at + timedelta(seconds=4)), (2, at + timedelta(seconds=5.5))]
    commits += [(3, at + timedelta(seconds=7.25)), (3, at + timedelta(seconds=9))]
    assert demo.gap(commits, 2, 3) == 1.75
    assert demo.gap(commits[:3], 2, 3) is None, "not before the new epoch has committed"


def test_every_command_the_demo_suggests_runs_where_the_stack_runs() -> None:
    """On real nodes the stack lives in its own network namespace: a command the demo
    prints must go there (``sluice-dev exec``) or it reaches nothing."""
    shell = "SLUICE_NETNS=1 SLUICE_STACK_DIR=/x/.stack-demo .venv/bin/sluice-dev exec --"
    text = demo.explore(shell, "http://10.251.1.3:8090/metrics", "ui-events-1")
    commands = [line.strip() for line in text.splitlines() if line.startswith("  ")]
    assert len(commands) >= 6
    assert all(command.startswith(shell) for command in commands)
    assert any("10.251.1.3:8090" in command for command in commands)
    assert demonodes.RealNodes().events > demonodes.AgentNodes().events
