"""The operator's reconcile and handlers against an in-memory API that fails on
demand (``tests/support/fakekube.py``): a conflict, a server error or a timeout on
any call leaves the pipeline safe (never two drivers, never a pod for an epoch the
status does not hold) and the next attempt (kopf retries a handler that raised)
finishes the job."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import kopf
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import REGISTRY
from urllib3.exceptions import ReadTimeoutError

from sluice_operator import handlers, naming
from sluice_operator.reconcile import reconcile
from tests.support.fakekube import Failure, FakeApi
from tests.support.observations import SPEC

pytestmark = pytest.mark.unit

KEY = ("ns", "kpis")
FAILURES: list[Failure] = [409, 500, "timeout"]
RAISED = (ApiException, ReadTimeoutError)


def body(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": naming.KIND,
        "metadata": {"name": "kpis", "namespace": "ns", "uid": "u-1", "generation": 1, **meta},
        "spec": copy.deepcopy(SPEC),
    }


def api_with_pipeline(**meta: Any) -> FakeApi:
    api = FakeApi()
    api.pipelines[KEY] = body(**meta)
    return api


def status(api: FakeApi) -> dict[str, Any]:
    return dict(api.pipelines[KEY].get("status", {}))


def drivers(api: FakeApi) -> list[tuple[str, str]]:
    """(pod name, epoch label) of every driver pod."""
    return sorted(
        (pod.metadata.name, (pod.metadata.labels or {}).get(naming.LABEL_EPOCH, ""))
        for pod in api.pods.values()
    )


def assert_one_driver_for_the_status_epoch(api: FakeApi) -> None:
    now = status(api)
    assert drivers(api) == [(now["driverPod"], str(now["epoch"]))]


def running(api: FakeApi) -> None:
    for pod in api.pods.values():
        pod.status = client.V1PodStatus(
            phase="Running",
            container_statuses=[
                client.V1ContainerStatus(
                    name="driver",
                    image="i",
                    image_id="",
                    ready=True,
                    restart_count=0,
                    state=client.V1ContainerState(running=client.V1ContainerStateRunning()),
                )
            ],
        )


def test_a_new_pipeline_has_its_epoch_written_before_its_pod_and_an_event_tied_to_it() -> None:
    api = api_with_pipeline()
    reconcile(api.kube(), body())
    assert status(api)["epoch"] == 1
    assert_one_driver_for_the_status_epoch(api)
    assert [(e.reason, e.involved_object.uid) for e in api.events] == [("DriverCreated", "u-1")]


@pytest.mark.parametrize("failure", FAILURES)
def test_a_failed_status_write_creates_no_pod_and_the_retry_starts_one(failure: Failure) -> None:
    api = api_with_pipeline()
    api.fail("patch_namespaced_custom_object_status", failure)
    with pytest.raises(RAISED):
        reconcile(api.kube(), body())
    assert api.pods == {}, "no pod for an epoch the status does not hold"
    reconcile(api.kube(), body())
    assert status(api)["epoch"] == 1
    assert_one_driver_for_the_status_epoch(api)


@pytest.mark.parametrize("failure", [500, "timeout"])
def test_a_failed_pod_creation_is_retried_and_leaves_one_driver(failure: Failure) -> None:
    api = api_with_pipeline()
    api.fail("create_namespaced_pod", failure)
    with pytest.raises(RAISED):
        reconcile(api.kube(), body())
    assert api.pods == {}
    reconcile(api.kube(), body())
    assert_one_driver_for_the_status_epoch(api)


def test_the_phase_metric_shows_the_status_written_before_a_reconcile_failed() -> None:
    """The status was written and the pod creation then failed: the phase gauge (what
    SluiceUpgradeStuck and SluicePipelineFailed read) says the written phase. On the
    old code a reconcile that raised recorded nothing, and in the live alert test a
    pipeline whose every reconcile failed kept its old Upgrading for 10 minutes
    while its status said Recovering: SluiceUpgradeStuck fired for it."""
    namespace = f"ns-{uuid.uuid4().hex[:8]}"
    api = FakeApi()
    api.pipelines[(namespace, "kpis")] = body(namespace=namespace)
    api.fail("create_namespaced_pod", 500, times=2)
    for _ in range(2):
        with pytest.raises(RAISED):
            reconcile(api.kube(), api.pipelines[(namespace, "kpis")])
    written = api.pipelines[(namespace, "kpis")]["status"]["phase"]
    shown = {
        phase: REGISTRY.get_sample_value(
            "sluice_operator_pipeline_phase", {"pipeline": f"{namespace}/kpis", "phase": phase}
        )
        for phase in ("Starting", "Running", "Upgrading", "Recovering")
    }
    assert shown[written] == 1, (written, shown)
    assert sum(v or 0 for v in shown.values()) == 1


def test_a_pod_that_already_exists_is_not_an_error() -> None:
    """A creation whose reply was lost (the pod was made) and is sent again gets 409."""
    api = api_with_pipeline()
    reconcile(api.kube(), body())
    api.pipelines[KEY]["status"].pop("driverPod")  # as if the write-ahead were replayed
    api.pipelines[KEY]["status"]["epoch"] = 0
    reconcile(api.kube(), body())
    assert status(api)["epoch"] == 1
    assert_one_driver_for_the_status_epoch(api)


def test_an_existing_object_of_the_pipelines_is_adopted_and_anyone_elses_is_not() -> None:
    """Issue 38, finding 5: a 409 on the driver's ServiceAccount was taken as the
    operator's own; now its owner references decide."""
    account = naming.service_account("kpis")
    api = api_with_pipeline()
    api.fail("create_service_account", 409)  # made by an earlier, unanswered call
    reconcile(api.kube(), body())
    assert_one_driver_for_the_status_epoch(api)

    stranger = api_with_pipeline()
    stranger.objects[("service_account", account)] = client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name=account)
    )
    stranger.fail("create_service_account", 409)
    reconcile(stranger.kube(), body())
    assert stranger.pods == {}
    said = [e for e in stranger.events if e.reason == "NotOwned"]
    assert len(said) == 1
    assert f"ServiceAccount {account!r} exists and is not this pipeline's" in said[0].message
    assert status(stranger)["restarts"] == 1


@pytest.mark.parametrize("failure", [500, "timeout"])
def test_a_failed_read_acts_on_nothing(failure: Failure) -> None:
    for method in ("get_namespaced_custom_object", "list_namespaced_pod"):
        api = api_with_pipeline()
        api.fail(method, failure)
        with pytest.raises(RAISED):
            reconcile(api.kube(), body())
        assert "status" not in api.pipelines[KEY], method
        assert api.pods == {}, method


def test_events_are_best_effort() -> None:
    api = api_with_pipeline()
    api.fail("create_namespaced_event", 500)
    reconcile(api.kube(), body())
    assert_one_driver_for_the_status_epoch(api)
    assert api.events == []


@pytest.mark.parametrize("failure", FAILURES)
def test_an_idle_running_pipeline_survives_any_failed_call_and_stays_as_it_is(
    failure: Failure,
) -> None:
    api = api_with_pipeline()
    reconcile(api.kube(), body())
    running(api)
    reconcile(api.kube(), body())
    settled = status(api)
    assert settled["phase"] == "Running"
    for method in ("get_namespaced_custom_object", "list_namespaced_pod"):
        api.fail(method, failure)
        with pytest.raises(RAISED):
            reconcile(api.kube(), body())
    reconcile(api.kube(), body())
    assert status(api) == settled
    assert_one_driver_for_the_status_epoch(api)


def test_deletion_is_retried_by_kopf_until_the_driver_has_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = api_with_pipeline()
    monkeypatch.setattr(handlers, "_kube", api.kube())
    monkeypatch.setattr(handlers, "DELETE_PATIENCE_SECONDS", 0.0)  # one look per call
    reconcile(api.kube(), body())
    running(api)
    reconcile(api.kube(), body())
    deleting = body(deletionTimestamp="2026-11-24T10:00:00Z")
    api.pipelines[KEY]["metadata"]["deletionTimestamp"] = "2026-11-24T10:00:00Z"
    api.fail("delete_namespaced_pod", 500)
    with pytest.raises(ApiException):
        on_delete(deleting)
    with pytest.raises(kopf.TemporaryError):
        on_delete(deleting)  # the stop was asked; the driver still finishes
    api.pods.clear()  # it finished its batch, committed and exited; the pod is gone
    on_delete(deleting)  # returns: kopf removes its finalizer


def on_delete(deleting: dict[str, Any]) -> None:
    """The delete handler as kopf calls it, with watches that hold nothing yet."""
    asyncio.run(handlers.on_delete(kopf.Body(deleting), driver_pods={}, node_views={}))


@pytest.mark.parametrize("refusal", [403, 422])
def test_a_pod_the_api_server_refuses_costs_one_epoch_per_attempt(refusal: int) -> None:
    """Before, the refusal raised; the next reconcile found no pod for the status's
    epoch and wrote the next one, and so on: one epoch per second, forever."""
    api = api_with_pipeline()
    api.fail("create_namespaced_pod", refusal, times=100)
    reconcile(api.kube(), body())  # no raise: the refusal is recorded
    first = status(api)
    for _ in range(5):
        reconcile(api.kube(), body())
    now = status(api)
    assert now["epoch"] == first["epoch"] == 1
    assert now["failures"] == 1
    assert now.get("driverPod") is None
    assert now["nextStartAt"]
    assert api.calls["create_namespaced_pod"] == 1
    assert "DriverRejected" in {e.reason for e in api.events}
