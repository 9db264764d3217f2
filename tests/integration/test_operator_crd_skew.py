"""An operator older than the CRD, on the real control plane: the CRD declares (and
defaults) a field this operator does not know, so the API server hands it over on every
read. The operator runs the pipeline on the fields it knows and says which one it
ignores (condition ``SpecUnderstood``, Event ``UnknownFields``). Before, it took the
spec for an invalid one: no driver, phase Failed (and a running driver stopped:
``tests/unit/test_crd_skew.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import config
from kubernetes.client import ApiextensionsV1Api

from sluice_dev.paths import Layout
from sluice_operator import crd, naming
from tests.support.operator import Operators, Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

LATER: str = "laterField"
FIELD: str = f"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/{LATER}"


@pytest.fixture(autouse=True)
def _stack(agent_stack: Any, standin_image: str) -> None:
    """The nodes and the stand-in image."""


def defaulted(custom: Any, namespace: str) -> Any:
    """The ``laterField`` the API server gives a new pipeline (a dry run): what a
    reader of the CRD as it is now gets."""
    body = {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": naming.KIND,
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": standin_spec(),
    }
    made = custom.create_namespaced_custom_object(
        naming.GROUP, naming.VERSION, namespace, naming.PLURAL, body, dry_run="All"
    )
    return made["spec"].get(LATER)


@pytest.fixture
def newer_crd(kube_stack: Layout, sluice_crd: str, custom: Any, namespace: str) -> Iterator[None]:
    """The committed CRD with one more spec field, ``laterField`` (default 7), as a
    newer Sluice's might have; the committed CRD again afterwards."""
    extensions = ApiextensionsV1Api(
        config.new_client_from_config(str(kube_stack.kubeconfig))  # type: ignore[no-untyped-call]
    )

    def patch(operation: dict[str, Any]) -> None:
        extensions.patch_custom_resource_definition(
            crd.NAME, [operation], _content_type="application/json-patch+json"
        )

    patch({"op": "add", "path": FIELD, "value": {"type": "integer", "default": 7}})
    try:
        wait_for(lambda: defaulted(custom, namespace) == 7, timeout=60, what="the newer CRD")
        yield
    finally:
        patch({"op": "remove", "path": FIELD})
        wait_for(lambda: defaulted(custom, namespace) is None, timeout=60, what="the CRD back")


def test_a_field_of_a_newer_crd_is_ignored_and_named_and_the_pipeline_runs(
    newer_crd: None, operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    pipeline.create(standin_spec())

    status = pipeline.wait_phase("Running", epoch=1)

    assert [p.metadata.name for p in pipeline.live_pods()] == ["kpis-driver-1"]
    found = pipeline.get()
    assert found is not None
    assert found["spec"][LATER] == 7
    understood = next(c for c in status["conditions"] if c["type"] == "SpecUnderstood")
    assert (understood["status"], understood["reason"]) == ("False", "UnknownFields")
    assert f"spec.{LATER}" in understood["message"]

    def warned() -> list[Any]:
        events = pipeline.core.list_namespaced_event(pipeline.namespace).items
        return [e for e in events if e.reason == "UnknownFields"]

    (event,) = wait_for(warned, timeout=30, what="the UnknownFields Event")
    assert event.type == "Warning"
    assert f"spec.{LATER}" in event.message
