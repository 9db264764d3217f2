"""``spec.spark.pod`` on the real API server: a driver pod with the pipeline's env,
Secret and ConfigMap references, volumes, labels and annotations is admitted in a
namespace that enforces the restricted Pod Security Standard, runs, and carries them.
"""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.paths import Layout
from tests.support.operator import Operators, Pipeline, standin_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

POD: dict[str, Any] = {
    "env": [
        {"name": "TZ", "value": "UTC"},
        {
            "name": "API_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "orders-api", "key": "token"}},
        },
    ],
    "envFrom": [{"configMapRef": {"name": "orders-config"}, "prefix": "ORDERS_"}],
    "volumes": [
        {
            "name": "ca",
            "secret": {"secretName": "orders-api", "items": [{"key": "token", "path": "t"}]},
        },
        {"name": "cache", "emptyDir": {"sizeLimit": "64Mi"}},
    ],
    "volumeMounts": [
        {"name": "ca", "mountPath": "/etc/orders", "readOnly": True},
        {"name": "cache", "mountPath": "/var/cache/orders"},
    ],
    "labels": {"team": "orders"},
    "annotations": {"example.com/owner": "orders@example.com"},
}


def test_a_driver_with_pod_settings_is_admitted_as_restricted_and_runs(
    agent_stack: Layout, operators: Operators, pipeline: Pipeline, core: Any
) -> None:
    core.patch_namespace(
        pipeline.namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    core.create_namespaced_secret(
        pipeline.namespace,
        {
            "metadata": {"name": "orders-api", "labels": {"sluice.dev/usable": "true"}},
            "stringData": {"token": "t0k3n"},
        },
    )
    core.create_namespaced_config_map(
        pipeline.namespace, {"metadata": {"name": "orders-config"}, "data": {"REGION": "eu"}}
    )
    operators.start("--allowed-pod-labels=team", "--allowed-pod-annotations=example.com/*")
    spec = standin_spec()
    spec["spark"]["pod"] = POD
    pipeline.create(spec)
    pipeline.wait_phase("Running", epoch=1)
    (pod,) = pipeline.live_pods()
    container = pod.spec.containers[0]
    env = {e.name: e for e in container.env}
    assert env["TZ"].value == "UTC"
    assert env["API_TOKEN"].value_from.secret_key_ref.name == "orders-api"
    assert container.env_from[0].config_map_ref.name == "orders-config"
    assert {m.mount_path for m in container.volume_mounts} >= {"/etc/orders", "/var/cache/orders"}
    assert pod.metadata.labels["team"] == "orders"
    assert pod.metadata.labels["sluice.dev/pipeline"] == pipeline.name
    assert pod.metadata.annotations["example.com/owner"] == "orders@example.com"
    assert pod.spec.security_context.run_as_non_root
    assert container.security_context.read_only_root_filesystem
