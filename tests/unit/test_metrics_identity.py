"""Metrics identity from Kubernetes (issue 22): the chart's PodMonitor gives every
driver sample the ``pipeline`` and ``namespace`` of the pod it was scraped from, and
drops a sample that names another pipeline, so one tenant's driver cannot publish
``sluice_last_commit_timestamp_seconds{pipeline="team-b/payments"}`` and silence
team B's alert. The relabelings run through Prometheus's own relabel package (the
provisioned ``relabel`` tool), after the target labels prometheus-operator sets for
a PodMonitor, with the scrape's ``honor_labels: false`` handling of clashes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.unit

CHART = REPO_ROOT / "charts" / "sluice"
# What prometheus-operator puts before a PodMonitor endpoint's own relabelings.
OPERATOR_GENERATED = [
    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
]
POD = {
    "__address__": "10.0.3.7:8090",
    "__meta_kubernetes_namespace": "team-a",
    "__meta_kubernetes_pod_name": "orders-driver-3",
    "__meta_kubernetes_pod_container_name": "driver",
    "__meta_kubernetes_pod_label_sluice_dev_pipeline": "orders",
    "__meta_kubernetes_pod_label_sluice_dev_role": "driver",
}
COMMIT = "sluice_last_commit_timestamp_seconds"


def snake(config: dict[str, Any]) -> dict[str, Any]:
    """A prometheus-operator RelabelConfig in Prometheus's own spelling."""
    return {re.sub(r"([A-Z])", r"_\1", key).lower(): value for key, value in config.items()}


def endpoint(helm_binary: Path) -> dict[str, Any]:
    argv = [str(helm_binary), "template", "rel", str(CHART), "--namespace", "sluice-system"]
    argv.append("--set=metrics.podMonitor.enabled=true")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    (monitor,) = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "PodMonitor"]
    (found,) = monitor["spec"]["podMetricsEndpoints"]
    return dict(found)


def scrape(relabel: Path, helm_binary: Path, samples: list[dict[str, str]]) -> Any:
    found = endpoint(helm_binary)
    assert found["honorLabels"] is False
    given = {
        "relabel_configs": OPERATOR_GENERATED + [snake(c) for c in found["relabelings"]],
        "metric_relabel_configs": [snake(c) for c in found["metricRelabelings"]],
        "target": POD,
        "samples": samples,
    }
    done = subprocess.run(
        [str(relabel)], input=json.dumps(given), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_drivers_samples_carry_its_pods_pipeline_and_namespace(
    relabel_binary: Path, helm_binary: Path
) -> None:
    honest = {"__name__": COMMIT, "pipeline": "team-a/orders"}
    unlabelled = {"__name__": "sluice_driver_info", "code_version": "orders:4"}
    result = scrape(relabel_binary, helm_binary, [honest, unlabelled])
    assert result["target"]["pipeline"] == "team-a/orders"
    first, second = result["samples"]
    assert first == {
        "__name__": COMMIT,
        "pipeline": "team-a/orders",
        "namespace": "team-a",
        "pod": "orders-driver-3",
        "container": "driver",
        "instance": "10.0.3.7:8090",
        "job": "sluice-driver",
    }
    assert second["pipeline"] == "team-a/orders"  # given by the pod, not by the driver
    assert second["code_version"] == "orders:4"


def test_a_sample_naming_another_pipeline_never_reaches_a_series(
    relabel_binary: Path, helm_binary: Path
) -> None:
    spoofed = [
        {"__name__": COMMIT, "pipeline": "team-b/payments"},  # another tenant's
        {"__name__": COMMIT, "pipeline": "team-a/other"},  # another of the same namespace
        {"__name__": COMMIT, "pipeline": "team-a/orders", "namespace": "team-b"},
        {"__name__": COMMIT, "pipeline": "team-a/orders", "exported_pipeline": "team-b/x"},
    ]
    result = scrape(relabel_binary, helm_binary, spoofed)
    first, second, third, fourth = result["samples"]
    assert first is None
    assert second is None
    assert third is not None
    assert third["namespace"] == "team-a"  # the pod's namespace wins
    assert "exported_namespace" not in third
    assert fourth is None  # a sample that brings its own exported_ label is not trusted
