"""Issue 38, finding 6: a pipeline's priority class, tolerations, node selector and
node affinity, labels and annotations only as the platform's policy allows
(``sluice_operator.podpolicy``), checked before any pod is created.

Reproduction on the old code (before ``podpolicy``): ``decide`` with the default
settings created the driver pod of a spec with ``tolerations: [{operator: Exists}]``
and ``nodeSelector: {node-role.kubernetes.io/control-plane: ""}`` (a CreatePod with
both on it), and so for ``priorityClassName: tenant-critical`` and the annotation
``sidecar.istio.io/inject``; the module did not exist, so every case below failed
(ImportError), and the decide cases failed on their assertions with the module there
but the check left out of ``refusals.refusal``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sluice_operator import cli, podpolicy
from sluice_operator.actions import CreatePod, Emit, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.model import Status
from sluice_operator.podpolicy import PodPolicy, key_allowed, refusals
from sluice_operator.settings import DEFAULTS
from tests.support.observations import observed, spec

pytestmark = pytest.mark.unit

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"


def with_spark(**spark: Any) -> Any:
    return spec(spark={"executors": {"instances": 0}, **spark})


def test_nothing_set_is_nothing_refused() -> None:
    assert refusals(with_spark(), PodPolicy()) == ()


def test_a_toleration_without_a_key_tolerates_every_taint_and_is_refused() -> None:
    found = refusals(with_spark(driver={"tolerations": [{"operator": "Exists"}]}), PodPolicy())
    assert found == (
        "spark.driver.tolerations[0]: a toleration with operator Exists and no key tolerates "
        "every taint (allowed: none; the operator's --allowed-toleration-keys)",
    )
    listed = PodPolicy(toleration_keys=frozenset({"dedicated"}))
    assert refusals(with_spark(driver={"tolerations": [{"operator": "Exists"}]}), listed)
    everything = PodPolicy(toleration_keys=frozenset({"*"}))
    assert refusals(with_spark(driver={"tolerations": [{"operator": "Exists"}]}), everything) == ()


def test_a_toleration_key_must_be_listed_for_the_driver_and_the_executors() -> None:
    tolerate = [{"key": "dedicated", "operator": "Equal", "value": "payments"}]
    wanted = with_spark(
        driver={"tolerations": tolerate},
        executors={"instances": 2, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
    )
    found = refusals(wanted, PodPolicy(toleration_keys=frozenset({"gpu"})))
    assert found == (
        "spark.driver.tolerations[0]: taint key 'dedicated' is not one the platform lets pods "
        "tolerate (allowed: gpu; the operator's --allowed-toleration-keys)",
    )
    assert refusals(wanted, PodPolicy(toleration_keys=frozenset({"gpu", "dedicated"}))) == ()


def test_a_node_selector_key_or_key_value_must_be_listed() -> None:
    wanted = with_spark(driver={"nodeSelector": {CONTROL_PLANE: ""}})
    (found,) = refusals(wanted, PodPolicy(node_labels=frozenset({"pool"})))
    assert found.startswith(f"spark.driver.nodeSelector: node label {CONTROL_PLANE}= ")
    assert "allowed: pool; the operator's --allowed-node-labels" in found
    pooled = with_spark(executors={"nodeSelector": {"pool": "payments"}})
    assert refusals(pooled, PodPolicy(node_labels=frozenset({"pool"}))) == ()
    assert refusals(pooled, PodPolicy(node_labels=frozenset({"pool=payments"}))) == ()
    (other,) = refusals(pooled, PodPolicy(node_labels=frozenset({"pool=orders"})))
    assert other.startswith("spark.executors.nodeSelector: node label pool=payments ")


def node_affinity(operator: str, *values: str, key: str = CONTROL_PLANE) -> dict[str, Any]:
    expression = {"key": key, "operator": operator, "values": list(values)}
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [expression]}}
                ],
            }
        }
    }


def test_node_affinity_is_held_to_the_same_node_labels() -> None:
    """Else a required node affinity would do what a refused nodeSelector does."""
    found = refusals(with_spark(driver=node_affinity("Exists")), PodPolicy())
    base = "spark.driver.affinity.nodeAffinity."
    assert [line.split(":")[0] for line in found] == [
        f"{base}requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0]",
        f"{base}preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]",
    ]
    assert f"node label {CONTROL_PLANE} Exists is not one" in found[0]
    values = PodPolicy(node_labels=frozenset({"pool=a", "pool=b"}))
    assert refusals(with_spark(driver=node_affinity("In", "a", "b", key="pool")), values) == ()
    assert refusals(with_spark(driver=node_affinity("In", "a", "c", key="pool")), values)
    assert refusals(with_spark(driver=node_affinity("Exists", key="pool")), values)
    bare = PodPolicy(node_labels=frozenset({"pool"}))
    assert refusals(with_spark(driver=node_affinity("NotIn", "a", key="pool")), bare) == ()


def test_a_priority_class_must_be_listed() -> None:
    wanted = with_spark(pod={"priorityClassName": "tenant-critical"})
    assert refusals(wanted, PodPolicy()) == (
        "spark.pod.priorityClassName: 'tenant-critical' is not a PriorityClass the platform "
        "allows (allowed: none; the operator's --allowed-priority-classes)",
    )
    assert refusals(wanted, PodPolicy(priority_classes=frozenset({"tenant-critical"}))) == ()


def test_labels_and_annotations_need_a_listed_key_or_prefix() -> None:
    wanted = with_spark(
        pod={
            "labels": {"team": "orders", "aadpodidbinding": "admin"},
            "annotations": {"sidecar.istio.io/inject": "false", "example.com/owner": "o"},
        }
    )
    policy = PodPolicy(label_keys=("team",), annotation_keys=("example.com/*",))
    assert refusals(wanted, policy) == (
        "spark.pod.labels: key aadpodidbinding (value 'admin') is not one the platform allows "
        "(allowed: team; the operator's --allowed-pod-labels)",
        "spark.pod.annotations: key sidecar.istio.io/inject (value 'false') is not one the "
        "platform allows (allowed: example.com/*; the operator's --allowed-pod-annotations)",
    )


@pytest.mark.parametrize(
    ("key", "patterns", "allowed"),
    [
        ("team", (), False),
        ("team", ("team",), True),
        ("teams", ("team",), False),
        ("example.com/owner", ("example.com/*",), True),
        ("example.org/owner", ("example.com/*",), False),
        ("team", ("*",), True),
        ("iam.amazonaws.com/role", ("*",), False),
        ("aadpodidbinding", ("*",), False),
        ("container.apparmor.security.beta.kubernetes.io/driver", ("*",), False),
        ("sidecar.istio.io/inject", ("*",), False),
        ("sidecar.istio.io/inject", ("*", "sidecar.istio.io/*"), True),
        ("iam.amazonaws.com/role", ("iam.amazonaws.com/role",), True),
    ],
)
def test_a_bare_star_leaves_out_the_identity_and_isolation_keys(
    key: str, patterns: tuple[str, ...], allowed: bool
) -> None:
    assert key_allowed(key, patterns) is allowed


def test_the_operator_creates_no_pod_and_says_which_field_until_the_platform_allows_it() -> None:
    wanted = with_spark(driver={"tolerations": [{"operator": "Exists"}]})
    decision = decide(observed(Status(), spec=wanted), DEFAULTS)
    assert not any(isinstance(a, CreatePod) for a in decision.actions)
    status = next(a.status for a in decision.actions if isinstance(a, WriteStatus))
    assert status.epoch == 0
    condition = next(c for c in status.conditions if c["type"] == podpolicy.CONDITION)
    assert (condition["status"], condition["reason"]) == ("False", "NotAllowed")
    assert "spark.driver.tolerations[0]" in condition["message"]
    (event,) = [a for a in decision.actions if isinstance(a, Emit)]
    assert (event.type, event.reason) == ("Warning", "PodSettingNotAllowed")
    assert "spark.driver.tolerations[0]" in event.message

    allowing = replace(DEFAULTS, pod_policy=PodPolicy(toleration_keys=frozenset({"*"})))
    later = decide(observed(status, spec=wanted), allowing)
    (create,) = [a for a in later.actions if isinstance(a, CreatePod)]
    assert create.manifest["spec"]["tolerations"] == [{"operator": "Exists"}]
    after = next(a.status for a in later.actions if isinstance(a, WriteStatus))
    condition = next(c for c in after.conditions if c["type"] == podpolicy.CONDITION)
    assert condition["status"] == "True"


def test_the_command_line_gives_the_policy() -> None:
    args = cli.parser().parse_args(
        [
            "--allowed-priority-classes=pipelines-high, pipelines-low",
            "--allowed-toleration-keys=dedicated",
            "--allowed-node-labels=pool,zone=eu-1",
            "--allowed-pod-labels=team,example.com/*",
            "--allowed-pod-annotations=example.com/*",
        ]
    )
    assert cli.pod_policy(args) == PodPolicy(
        priority_classes=frozenset({"pipelines-high", "pipelines-low"}),
        toleration_keys=frozenset({"dedicated"}),
        node_labels=frozenset({"pool", "zone=eu-1"}),
        label_keys=("team", "example.com/*"),
        annotation_keys=("example.com/*",),
    )
    assert cli.pod_policy(cli.parser().parse_args([])) == PodPolicy()
