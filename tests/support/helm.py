"""``helm`` as the cluster's admin runs it against a stack's API server, with its
caches in a directory of the test's own: for the chart's install tests on the node
agent and on real nodes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice_dev.paths import REPO_ROOT, Layout

CHART = REPO_ROOT / "charts" / "sluice"


def operator_pods(core: Any, namespace: str, release: str) -> list[Any]:
    """The operator pods of ``release`` not being deleted."""
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=operator"
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def runner(binary: Path, layout: Layout, home: Path) -> Callable[..., str]:
    """``run(*args)``: ``helm ARGS`` as the admin of ``layout``'s cluster; its output,
    or a failed assertion with helm's own words."""
    env = {
        **os.environ,
        "KUBECONFIG": str(layout.kubeconfig),
        "HELM_CACHE_HOME": str(home / "helm-cache"),
        "HELM_CONFIG_HOME": str(home / "helm-config"),
        "HELM_DATA_HOME": str(home / "helm-data"),
    }

    def run(*args: str) -> str:
        done = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    return run
