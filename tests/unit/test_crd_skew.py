"""An operator older than its CRD: the API server hands it fields it does not know.

Reproduction (before the fix): a CRD that gains a field with a default (as
``spec.standby`` did) is applied before the operator is upgraded; from then on every
pipeline read by the old operator carries the new field, which its spec model refused
("Extra inputs are not permitted"), and the operator took every pipeline for an
invalid one and stopped its running driver: an outage of every pipeline for the length
of a rollout. This test's first case failed so on that code: the driver was stopped and
the pipeline left Running.

Now the operator reads the spec without the fields it does not know, acts on the rest
as before (the drivers it builds get its own view of the spec, which their image
understands), and says which fields it ignored: condition ``SpecUnderstood`` False,
reason ``UnknownFields``, and a Warning Event."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_operator.reconcile import parse_spec, reconcile
from tests.unit.test_reconcile_faults import (
    KEY,
    api_with_pipeline,
    assert_one_driver_for_the_status_epoch,
    body,
    running,
    status,
)

pytestmark = pytest.mark.unit


def condition(kind: str, found: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in found.get("conditions", ()) if c["type"] == kind), None)


def test_fields_of_a_newer_crd_leave_the_running_driver_alone_and_are_reported() -> None:
    api = api_with_pipeline()
    reconcile(api.kube(), body())
    running(api)
    newer = body()
    newer["spec"]["standbyZone"] = "b"  # a field a newer CRD added (and defaulted)
    newer["spec"]["failover"] = {**newer["spec"].get("failover", {}), "graceSeconds": 3}
    api.pipelines[KEY]["spec"] = newer["spec"]

    reconcile(api.kube(), newer)

    assert status(api)["epoch"] == 1
    assert_one_driver_for_the_status_epoch(api)
    assert all(pod.metadata.deletion_timestamp is None for pod in api.pods.values())
    assert status(api)["phase"] == "Running"
    found = condition("SpecUnderstood", status(api))
    assert found is not None
    assert (found["status"], found["reason"]) == ("False", "UnknownFields")
    assert "spec.standbyZone" in found["message"]
    assert "spec.failover.graceSeconds" in found["message"]
    assert [e.reason for e in api.events].count("UnknownFields") == 1

    reconcile(api.kube(), newer)  # said once, not at every reconcile
    assert [e.reason for e in api.events].count("UnknownFields") == 1

    api.pipelines[KEY]["spec"] = body()["spec"]
    reconcile(api.kube(), body())
    found = condition("SpecUnderstood", status(api))
    assert found is not None
    assert found["status"] == "True"
    assert_one_driver_for_the_status_epoch(api)


def test_an_invalid_value_is_still_an_invalid_spec() -> None:
    """Only unknown fields are set aside: a known field with a bad value, beside an
    unknown one, still makes the spec invalid, naming both."""
    raw = body()["spec"]
    raw["standbyZone"] = "b"
    raw["trigger"] = {"intervalSeconds": "often"}

    spec, error, ignored = parse_spec(raw)

    assert spec is None
    assert error is not None
    assert "spec.trigger.intervalSeconds" in error
    assert "spec.standbyZone" in error
    assert ignored == ()
