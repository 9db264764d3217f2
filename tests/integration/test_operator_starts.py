"""Driver pods that never start, on the real control plane and node agent: an image
that cannot be pulled, a pod the API server refuses, a Secret the platform has not
labelled for pipelines, or one the spec would send where its annotation does not
allow. Each is said in a condition and an Event; the first two count as failures
after the start deadline (or at once, when refused), and end Failed after
``restart.maxFailures`` without climbing epochs; a pipeline waiting for a Secret's
label or annotation creates no pod and starts by itself once the Secret allows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sluice_dev.paths import Layout
from sluice_dev.servers import nodeagent
from sluice_operator import naming
from tests.support.operator import Operators, Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(autouse=True)
def _stack(agent_stack: Any, standin_image: str) -> None:
    """Every test here needs the nodes and the stand-in image."""


def condition(pipeline: Pipeline, kind: str) -> dict[str, Any] | None:
    conditions = pipeline.status().get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def condition_false(pipeline: Pipeline, kind: str) -> dict[str, Any]:
    """The pipeline's ``kind`` condition, once it is False (within 60 s)."""
    found: dict[str, Any] = wait_for(
        lambda: (c := condition(pipeline, kind)) and c["status"] == "False" and c,
        timeout=60,
        what=f"{kind}=False",
    )
    return found


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
    waiting = condition_false(pipeline, "DriverStarted")
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
    waiting = condition_false(pipeline, "DriverStarted")
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

    missing = condition_false(pipeline, "SecretsUsable")
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


def test_a_running_driver_whose_secret_loses_its_label_stops_and_starts_again_once_relabelled(
    operators: Operators, pipeline: Pipeline
) -> None:
    """Consent re-checked while a driver runs (issue 38, finding 2). On the old code
    the operator read a Secret's label only before it created a pod: taking the label
    off the Secret of a running pipeline changed nothing, and its driver kept using
    the Secret until it happened to restart (this test's wait for the stop timed out)."""
    operators.start("--consent-recheck-seconds=2")
    pipeline.core.create_namespaced_secret(
        pipeline.namespace,
        client.V1Secret.model_validate(
            {
                "metadata": {"name": "api-token", "labels": {"sluice.dev/usable": "true"}},
                "stringData": {"t": "s3cr3t"},
            }
        ),
    )
    spec = standin_spec()
    spec["transform"]["optionsFrom"] = [{"option": "token", "secret": "api-token", "key": "t"}]
    pipeline.create(spec)
    pipeline.wait_phase("Running", epoch=1, timeout=90)

    pipeline.core.patch_namespaced_secret(
        "api-token", pipeline.namespace, {"metadata": {"labels": {"sluice.dev/usable": None}}}
    )
    withdrawn = condition_false(pipeline, "SecretsUsable")
    assert "'api-token' (transform.optionsFrom[0].secret)" in withdrawn["message"]
    assert "lacks the label" in withdrawn["message"]
    wait_for(lambda: pipeline.live_pods() == [], timeout=120, what="the driver to stop")
    assert "SecretNotUsable" in reasons(pipeline)
    assert pipeline.status()["epoch"] == 1  # stopped, not replaced

    pipeline.core.patch_namespaced_secret(
        "api-token", pipeline.namespace, {"metadata": {"labels": {"sluice.dev/usable": "true"}}}
    )
    status = pipeline.wait_phase("Running", epoch=2, timeout=90)
    usable_now = next(c for c in status["conditions"] if c["type"] == "SecretsUsable")
    assert usable_now["status"] == "True"


def test_a_self_labelled_service_account_token_is_never_mounted(
    operators: Operators, pipeline: Pipeline
) -> None:
    """Issue 38, finding 2. Reproduction: the tenant creates a Secret of type
    kubernetes.io/service-account-token naming a ServiceAccount of its namespace, with
    the consent label, and mounts it through spark.pod.volumes; the token controller
    fills it in and the driver started with the token (consent read labels only). Now
    the pipeline waits with SecretsUsable=False naming the token, and no pod."""
    operators.start()
    # The token controller deletes a token Secret whose ServiceAccount does not exist
    # (yet): a fresh namespace gets its "default" account from another controller.
    wait_for(
        lambda: any(
            a.metadata.name == "default"
            for a in pipeline.core.list_namespaced_service_account(pipeline.namespace).items
        ),
        timeout=60,
        what="the namespace's default ServiceAccount",
    )
    pipeline.core.create_namespaced_secret(
        pipeline.namespace,
        client.V1Secret.model_validate(
            {
                "metadata": {
                    "name": "minted",
                    "labels": {"sluice.dev/usable": "true"},
                    "annotations": {"kubernetes.io/service-account.name": "default"},
                },
                "type": "kubernetes.io/service-account-token",
            }
        ),
    )
    wait_for(
        lambda: (
            "token"
            in (pipeline.core.read_namespaced_secret("minted", pipeline.namespace).data or {})
        ),
        timeout=60,
        what="the token controller to fill the Secret in (the escape is real)",
    )
    spec = standin_spec()
    spec["spark"]["pod"] = {
        "volumes": [{"name": "t", "secret": {"secretName": "minted"}}],
        "volumeMounts": [{"name": "t", "mountPath": "/var/t"}],
    }
    pipeline.create(spec)
    refused = condition_false(pipeline, "SecretsUsable")
    assert "'minted' (spark.pod.volumes[0].secret) is a service-account token" in refused["message"]
    assert "of default" in refused["message"]
    assert pipeline.live_pods() == []
    assert pipeline.status().get("epoch", 0) == 0


def test_a_service_account_of_the_pipelines_name_made_by_someone_else_is_not_adopted(
    operators: Operators, pipeline: Pipeline
) -> None:
    """Issue 38, finding 5. Reproduction: a ServiceAccount named like the pipeline's
    driver account (``<name>-driver``) existed already, made by someone else (in a
    cloud, bound to a workload identity); the operator ignored the 409 and ran the
    driver as it. Now no pod is created, the failure names the account, and once it
    is gone the pipeline starts with its own."""
    operators.start()
    account = naming.service_account(pipeline.name)
    pipeline.core.create_namespaced_service_account(
        pipeline.namespace,
        client.V1ServiceAccount.model_validate({"metadata": {"name": account}}),
    )
    spec = standin_spec()
    spec["restart"] = {"maxFailures": 10, "backoffSeconds": 1}
    pipeline.create(spec)
    status = wait_for(
        lambda: (s := pipeline.status()) and "is not this pipeline's" in s.get("message", "") and s,
        timeout=60,
        what="the status to say the ServiceAccount is someone else's",
    )
    assert f"ServiceAccount {account!r} exists" in status["message"]
    assert pipeline.live_pods() == []
    assert "NotOwned" in reasons(pipeline)
    pipeline.core.delete_namespaced_service_account(account, pipeline.namespace)
    running = pipeline.wait_phase("Running", timeout=120)
    [pod] = pipeline.live_pods()
    assert pod.spec.service_account_name == account
    owned = pipeline.core.read_namespaced_service_account(account, pipeline.namespace)
    assert [ref.uid for ref in owned.metadata.owner_references] == [
        (pipeline.get() or {})["metadata"]["uid"]
    ]
    assert running["epoch"] >= 2


def test_a_secret_goes_only_where_its_annotation_allows_and_must_say_where_if_required(
    operators: Operators, pipeline: Pipeline
) -> None:
    """Where consented credentials may go (issue 22): with the platform's requirement
    on, a login without the annotation, then one whose annotation does not list the
    checkpoint store, keep the driver from being created (no pod, no epoch) with a
    condition naming the Secret, the field, the endpoint and the annotation; listed,
    the pipeline starts by itself."""
    pipeline.core.create_namespaced_secret(
        pipeline.namespace,
        client.V1Secret.model_validate(
            {
                "metadata": {"name": "ckpt-login", "labels": {"sluice.dev/usable": "true"}},
                "stringData": {"username": "u", "password": "p"},
            }
        ),
    )
    operators.start("--require-secret-endpoints")
    spec = standin_spec()
    spec["checkpoint"]["cassandra"]["credentialsSecret"] = "ckpt-login"
    pipeline.create(spec)

    def usable_says(text: str) -> dict[str, Any] | None:
        c = condition(pipeline, "SecretsUsable")
        return c if c and c["status"] == "False" and text in c["message"] else None

    unannotated = wait_for(
        lambda: usable_says("has no annotation"),
        timeout=60,
        what="SecretsUsable to say the annotation is missing",
    )
    assert unannotated["reason"] == "EndpointNotAllowed"
    assert "'ckpt-login' (checkpoint.cassandra.credentialsSecret)" in unannotated["message"]
    assert "sluice.dev/allowed-endpoints" in unannotated["message"]

    def annotate(value: str) -> None:
        annotations = {"sluice.dev/allowed-endpoints": value}
        pipeline.core.patch_namespaced_secret(
            "ckpt-login", pipeline.namespace, {"metadata": {"annotations": annotations}}
        )

    annotate("cassandra.example.com:9042")
    elsewhere = wait_for(
        lambda: usable_says("may not be sent to"),
        timeout=60,
        what="SecretsUsable to name the endpoint the annotation does not allow",
    )
    assert elsewhere["message"] == (
        "Secret 'ckpt-login' (checkpoint.cassandra.credentialsSecret) may not be sent to "
        "127.0.0.1:1 (checkpoint.cassandra.contactPoints): its annotation "
        "sluice.dev/allowed-endpoints allows cassandra.example.com:9042"
    )
    assert pipeline.live_pods() == []
    assert pipeline.status().get("epoch", 0) == 0
    assert "SecretNotUsable" in reasons(pipeline)
    annotate("cassandra.example.com:9042, 127.0.0.1")
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
