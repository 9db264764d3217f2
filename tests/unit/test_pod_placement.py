"""Where and as whom a driver pod runs (issue 14 item 4): node affinity and pod
anti-affinity in Kubernetes' shape, a CPU limit and memory overhead, and a
ServiceAccount only from the platform's list."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from sluice_operator import builders
from sluice_operator.actions import CreatePod, Emit, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.model import Status
from sluice_operator.refusals import SERVICE_ACCOUNT_ALLOWED
from sluice_operator.settings import DEFAULTS
from tests.support.observations import observed, spec

pytestmark = pytest.mark.unit

OWNER = builders.Owner("kpis", "ns", "u1", "cluster-1")
AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["stream"]}]}
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "preference": {
                    "matchExpressions": [{"key": "cpu-gen", "operator": "Gt", "values": ["3"]}]
                },
            }
        ],
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {
                        "matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]
                    },
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    },
}


def driver(**driver_fields: Any) -> dict[str, Any]:
    return {"driver": driver_fields}


def test_affinity_goes_to_the_pod_as_written() -> None:
    pod = builders.driver_pod(OWNER, spec(spark=driver(affinity=AFFINITY)), 1, "h")
    assert pod["spec"]["affinity"] == AFFINITY


def test_cpu_limit_and_memory_overhead_size_the_container() -> None:
    pod = builders.driver_pod(
        OWNER, spec(spark=driver(memory="2g", cpuLimit="1500m", memoryOverhead="1g")), 1, "h"
    )
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["limits"]["cpu"] == "1500m"
    assert resources["limits"]["memory"] == resources["requests"]["memory"] == "3072Mi"
    default = builders.driver_pod(OWNER, spec(spark=driver(memory="2g")), 1, "h")
    limits = default["spec"]["containers"][0]["resources"]["limits"]
    assert "cpu" not in limits  # no limit unless asked: idle CPU is usable
    assert limits["memory"] == "2432Mi"  # 2048 + max(384, 10 %)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}},
            "nodeSelectorTerms",
        ),
        (
            {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {
                                    "matchExpressions": [{"key": "a", "operator": "In"}]
                                },
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                }
            },
            "operator In needs values",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 1,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "gen", "operator": "Gt", "values": ["x"]}
                                    ]
                                },
                            }
                        ]
                    }
                }
            },
            "exactly one integer",
        ),
        ({"affinity": {"podAffinity": {}}}, "podAffinity"),
        ({"cpuLimit": "lots"}, "cpuLimit"),
    ],
)
def test_placement_the_api_server_would_refuse_is_refused_by_the_spec(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        spec(spark=driver(**change))


def with_account(name: str, executors: int = 0) -> Any:
    return spec(
        spark={
            "executors": {"instances": executors},
            "pod": {"serviceAccountName": name},
        }
    )


def test_a_listed_service_account_runs_the_driver() -> None:
    settings = replace(DEFAULTS, driver_service_accounts=frozenset({"datastore-writer"}))
    decision = decide(observed(Status(), spec=with_account("datastore-writer")), settings)
    (create,) = [a for a in decision.actions if isinstance(a, CreatePod)]
    assert create.manifest["spec"]["serviceAccountName"] == "datastore-writer"
    assert create.manifest["spec"]["automountServiceAccountToken"] is False


def test_an_unlisted_service_account_gets_a_condition_and_no_pod() -> None:
    decision = decide(observed(Status(), spec=with_account("cluster-admin")), DEFAULTS)
    assert not any(isinstance(a, CreatePod) for a in decision.actions)
    status = next(a.status for a in decision.actions if isinstance(a, WriteStatus))
    condition = next(c for c in status.conditions if c["type"] == SERVICE_ACCOUNT_ALLOWED)
    assert (condition["status"], condition["reason"]) == ("False", "NotListed")
    assert "'cluster-admin'" in condition["message"]
    assert [e.reason for e in decision.actions if isinstance(e, Emit)] == [
        "ServiceAccountNotAllowed"
    ]
    listed = replace(DEFAULTS, driver_service_accounts=frozenset({"cluster-admin"}))
    later = decide(observed(status, spec=with_account("cluster-admin")), listed)
    assert any(isinstance(a, CreatePod) for a in later.actions)
    after = next(a.status for a in later.actions if isinstance(a, WriteStatus))
    condition = next(c for c in after.conditions if c["type"] == SERVICE_ACCOUNT_ALLOWED)
    assert condition["status"] == "True"


def test_a_service_account_is_for_drivers_without_executors() -> None:
    with pytest.raises(ValidationError, match="without executors"):
        with_account("datastore-writer", executors=2)
