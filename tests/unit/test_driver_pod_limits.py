"""What a driver pod may use of its node and of the API server: a bounded scratch
space, and a Kubernetes token only when it starts executor pods (issue 22)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_api.spec import PipelineSpec
from sluice_operator import builders

pytestmark = pytest.mark.unit

OWNER = builders.Owner("orders", "team-a", "uid-1")


def spec(spark: dict[str, Any]) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "image": "registry.example.com/team-a/orders:1",
            "source": {"kafka": {"bootstrapServers": "kafka:9092", "topics": ["orders"]}},
            "transform": {"entrypoint": "orders.transform:run"},
            "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
            "spark": spark,
        }
    )


def test_by_default_spark_runs_in_the_driver_pod_which_gets_no_token() -> None:
    pod = builders.driver_pod(OWNER, spec({}), 1, "h")
    assert pod["spec"]["automountServiceAccountToken"] is False
    env = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
    assert "SLUICE_SPARK_MASTER" not in env  # local mode: nothing to ask the API server


def test_only_a_driver_with_executor_pods_gets_its_token() -> None:
    pod = builders.driver_pod(OWNER, spec({"executors": {"instances": 2}}), 1, "h")
    assert pod["spec"]["automountServiceAccountToken"] is True


def test_scratch_space_is_bounded_on_disk_and_in_the_pods_storage_request() -> None:
    pod = builders.driver_pod(OWNER, spec({"driver": {"scratch": "10Gi"}}), 1, "h")
    (scratch,) = [v for v in pod["spec"]["volumes"] if v["name"] == "scratch"]
    assert scratch["emptyDir"] == {"sizeLimit": "10Gi"}
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"]["ephemeral-storage"] == "10Gi"
    assert resources["limits"]["ephemeral-storage"] == "10Gi"
    default = builders.driver_pod(OWNER, spec({}), 1, "h")
    assert default["spec"]["volumes"][0]["emptyDir"] == {"sizeLimit": "2Gi"}
