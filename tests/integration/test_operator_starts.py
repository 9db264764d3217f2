"""Driver pods that never start, on the real control plane and node agent: an image
that cannot be pulled, a pod the API server refuses, a Secret the platform has not
labelled for pipelines. Each is said in a condition and an Event; the first two
count as failures after the start deadline (or at once, when refused), and end
Failed after ``restart.maxFailures`` without climbing epochs; a pipeline waiting for
a Secret's label creates no pod and starts by itself once the Secret is labelled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sluice_dev.paths import Layout
from sluice_dev.servers import nodeagent
from tests.support.operator import Operators, Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(autouse=True)
def _stack(agent_stack: Any, standin_image: str) -> None:
    """Every test here needs the nodes and the stand-in image."""


def condition(pipeline: Pipeline, kind: str) -> dict[str, Any] | None:
    conditions = pipeline.status().get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def reasons(pipeline: Pipeline) -> set[str]:
    return {e.reason for e in pipeline.core.list_namespaced_event(pipeline.namespace).items}


def test_an_image_that_cannot_be_pulled_fails_after_the_start_deadline(
    operators: Operators, pipeline: Pipeline, agent_stack: Layout, tmp_path: Path
) -> None:
    nodeagent.register_image(agent_stack, "sluice-test/unpullable", tmp_path / "no-such-image")
    operators.start()
    spec = standin_spec(image="sluice-test/unpullable:v1")
    spec["restart"] = {"startDeadlineSeconds": 10, "maxFailures": 2, "backoffSeconds": 1}
    pipeline.create(spec)
    waiting = wait_for(
        lambda: (c := condition(pipeline, "DriverStarted")) and c["status"] == "False" and c,
        timeout=60,
        what="DriverStarted=False",
    )
    assert waiting["reason"] in ("ErrImagePull", "ImagePullBackOff")
    assert "sluice-test/unpullable:v1" in waiting["message"]
    status = pipeline.wait_phase("Failed", timeout=120)
    assert "did not start within 10s" in status["message"]
    assert status["epoch"] == 2  # two attempts, then Failed: no epoch per look
    assert pipeline.live_pods() == []
    assert {"DriverNotStarting", "DriverFailed", "Failed"} <= reasons(pipeline)


def test_a_driver_waiting_for_a_missing_config_map_starts_once_it_exists(
    operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    spec = standin_spec()
    spec["spark"]["pod"] = {
        "env": [{"name": "REGION", "valueFrom": {"configMapKeyRef": {"name": "api", "key": "r"}}}]
    }
    pipeline.create(spec)
    waiting = wait_for(
        lambda: (c := condition(pipeline, "DriverStarted")) and c["status"] == "False" and c,
        timeout=60,
        what="DriverStarted=False",
    )
    assert waiting["reason"] == "CreateContainerConfigError"
    assert "api" in waiting["message"]
    assert pipeline.status()["phase"] == "Starting"
    pipeline.core.create_namespaced_config_map(
        pipeline.namespace, {"metadata": {"name": "api"}, "data": {"r": "eu"}}
    )
    status = pipeline.wait_phase("Running", epoch=1, timeout=90)
    started = next(c for c in status["conditions"] if c["type"] == "DriverStarted")
    assert started["status"] == "True"


def test_a_pipeline_naming_a_secret_without_the_platforms_label_gets_no_pod_until_it_is_labelled(
    operators: Operators, pipeline: Pipeline
) -> None:
    """Secrets by consent (issue 22): a missing Secret, then one without the label,
    each keep the driver from being created (no pod, no epoch) with a condition naming
    the Secret and the label; labelled, the pipeline starts by itself."""
    operators.start()
    spec = standin_spec()
    spec["transform"]["optionsFrom"] = [{"option": "token", "secret": "api-token", "key": "t"}]
    pipeline.create(spec)

    def usable() -> dict[str, Any] | None:
        return condition(pipeline, "SecretsUsable")

    missing = wait_for(
        lambda: (c := usable()) and c["status"] == "False" and c,
        timeout=60,
        what="SecretsUsable=False",
    )
    assert missing["reason"] == "NotLabelled"
    assert "'api-token' (transform.optionsFrom[0].secret) does not exist" in missing["message"]
    pipeline.core.create_namespaced_secret(
        pipeline.namespace,
        client.V1Secret.model_validate(
            {"metadata": {"name": "api-token"}, "stringData": {"t": "s3cr3t"}}
        ),
    )
    unlabelled = wait_for(
        lambda: (c := usable()) and "lacks the label" in c["message"] and c,
        timeout=60,
        what="SecretsUsable to say the label is missing",
    )
    assert "sluice.dev/usable=true" in unlabelled["message"]
    assert pipeline.live_pods() == []
    assert pipeline.status().get("epoch", 0) == 0
    assert "SecretNotUsable" in reasons(pipeline)
    pipeline.core.patch_namespaced_secret(
        "api-token", pipeline.namespace, {"metadata": {"labels": {"sluice.dev/usable": "true"}}}
    )
    status = pipeline.wait_phase("Running", epoch=1, timeout=90)
    usable_now = next(c for c in status["conditions"] if c["type"] == "SecretsUsable")
    assert usable_now["status"] == "True"


def test_a_pod_the_api_server_refuses_ends_failed_with_one_epoch_per_attempt(
    operators: Operators, pipeline: Pipeline
) -> None:
    pipeline.core.create_namespaced_resource_quota(
        pipeline.namespace,
        client.V1ResourceQuota.model_validate(
            {"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}
        ),
    )
    operators.start()
    spec = standin_spec()
    spec["restart"] = {"maxFailures": 3, "backoffSeconds": 1, "maxBackoffSeconds": 2}
    pipeline.create(spec)
    status = pipeline.wait_phase("Failed", timeout=90)
    assert status["epoch"] == 3
    assert "refused by the API server" in status["message"]
    assert "quota" in status["message"]
    assert "DriverRejected" in reasons(pipeline)
    assert pipeline.pods() == []
