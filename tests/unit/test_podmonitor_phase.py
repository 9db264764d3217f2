"""The chart's PodMonitor scrapes drivers that run: a driver pod still Pending (its
image failing to pull during a stuck upgrade) is no target, so ``SluiceDriverDown``
does not fire beside ``SluiceUpgradeStuck`` for it (seen live in
tests/e2e/test_alerts.py before the PodMonitor dropped Pending pods). The
relabelings run through Prometheus's own relabel package (the provisioned
``relabel`` tool), as in test_metrics_identity.py."""

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


def relabelings(helm_binary: Path) -> list[dict[str, Any]]:
    argv = [str(helm_binary), "template", "rel", str(CHART), "--namespace", "sluice-system"]
    argv.append("--set=metrics.podMonitor.enabled=true")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    (monitor,) = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "PodMonitor"]
    (found,) = monitor["spec"]["podMetricsEndpoints"]
    return [
        {re.sub(r"([A-Z])", r"_\1", k).lower(): v for k, v in c.items()}
        for c in found["relabelings"]
    ]


def target(relabel: Path, helm_binary: Path, phase: str) -> Any:
    pod = {
        "__address__": "10.0.3.7:8090",
        "__meta_kubernetes_namespace": "team-a",
        "__meta_kubernetes_pod_name": "orders-driver-3",
        "__meta_kubernetes_pod_label_sluice_dev_pipeline": "orders",
        "__meta_kubernetes_pod_phase": phase,
    }
    given = {
        "relabel_configs": relabelings(helm_binary),
        "metric_relabel_configs": [],
        "target": pod,
        "samples": [],
    }
    done = subprocess.run(
        [str(relabel)], input=json.dumps(given), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["target"]


def test_a_running_driver_is_scraped_and_a_pending_one_is_not(
    relabel_binary: Path, helm_binary: Path
) -> None:
    running = target(relabel_binary, helm_binary, "Running")
    assert running["job"] == "sluice-driver"
    assert running["pipeline"] == "team-a/orders"
    assert target(relabel_binary, helm_binary, "Pending") is None
