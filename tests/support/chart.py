"""The chart's cluster-scoped objects for drivers, as ``helm install sluice`` creates
them, on the local stack: the tests render them with the provisioned ``helm`` (never
a copy) and apply them as the admin, so that what the e2e and hostile-tenant tests
exercise is exactly what the chart ships."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Final

import yaml

from sluice_dev.kubectl import Kubectl, KubectlError
from sluice_dev.paths import REPO_ROOT, Layout
from tests.support.waiting import wait_for

CHART: Final = REPO_ROOT / "charts" / "sluice"
RELEASE: Final = "sluice"
DRIVER_POD_POLICY: Final = f"{RELEASE}-driver-pods"
POLICY_KINDS: Final = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
PROBE_USER: Final = "system:serviceaccount:default:probe-driver"
"""A driver-like account the policy matches; impersonated with ``system:masters`` so
that RBAC lets the request through to admission."""


def render(helm: Path, *values: str) -> list[dict[str, Any]]:
    """``helm template sluice charts/sluice`` with ``--set`` ``values``."""
    argv = [str(helm), "template", RELEASE, str(CHART), *(f"--set={v}" for v in values)]
    rendered = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def apply_driver_pod_policy(layout: Layout, helm: Path) -> str:
    """The ValidatingAdmissionPolicy confining drivers' tokens and its binding, bound
    in every namespace (``clusterWide: true``: the tests make a namespace each), once
    the API server enforces it. Returns the policy's name."""
    kubectl = Kubectl(layout)
    for doc in render(helm, "clusterWide=true"):
        if doc["kind"] in POLICY_KINDS:
            kubectl.apply(doc)
    wait_for(lambda: _refuses_probe(kubectl), timeout=60, what=f"{DRIVER_POD_POLICY} in force")
    return DRIVER_POD_POLICY


def _refuses_probe(kubectl: Kubectl) -> bool:
    """A server-side dry run (admission runs, nothing is stored) of a pod that is no
    executor, created by a driver-like account: refused by the policy once in force."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "policy-probe", "namespace": "default"},
        "spec": {"containers": [{"name": "probe", "image": "probe"}]},
    }
    try:
        kubectl(
            f"--as={PROBE_USER}",
            "--as-group=system:masters",
            "create",
            "--dry-run=server",
            "-f",
            "-",
            stdin=json.dumps(pod),
        )
    except KubectlError as err:
        return DRIVER_POD_POLICY in str(err)
    return False
