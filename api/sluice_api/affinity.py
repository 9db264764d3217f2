"""Where a pipeline's pods may and should run: a bounded part of Kubernetes' affinity.

``spec.spark.driver.affinity`` takes node affinity (required and preferred node
selector terms) and pod anti-affinity (keep away from pods with some labels, per
topology domain: another node, another zone), in the Kubernetes API's own shape, so
the operator copies it to the pod unchanged. Only the fields below exist: operators
are enums, every list and string is bounded, so a manifest the API server would
refuse at pod creation is refused by the CRD instead. Pod affinity (run *next to*
other pods) and namespace selectors are left out: a tenant has no business placing
its driver by other namespaces' pods.
"""

from __future__ import annotations

from typing import Annotated, Final, Self

from pydantic import Field, model_validator

from sluice_api.pod import LABEL_KEY, LABEL_VALUE
from sluice_api.spec_base import Model

LabelKey = Annotated[str, Field(pattern=LABEL_KEY, min_length=1, max_length=317)]
LabelValue = Annotated[str, Field(pattern=LABEL_VALUE, max_length=63)]
NODE_OPERATORS: Final = r"^(In|NotIn|Exists|DoesNotExist|Gt|Lt)$"
LABEL_OPERATORS: Final = r"^(In|NotIn|Exists|DoesNotExist)$"


def _values_fit(operator: str, values: list[str], *, numeric: bool) -> None:
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"operator {operator} needs values")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"operator {operator} takes no values")
    if numeric and operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].isdigit()):
        raise ValueError(f"operator {operator} takes exactly one integer value")


class NodeRequirement(Model):
    key: LabelKey = Field(description="Node label key.")
    operator: str = Field(
        pattern=NODE_OPERATORS,
        max_length=12,
        description="In, NotIn, Exists, DoesNotExist, Gt, Lt.",
    )
    values: list[LabelValue] = Field(default_factory=list, max_length=32, description="Values.")

    @model_validator(mode="after")
    def _fits(self) -> Self:
        _values_fit(self.operator, self.values, numeric=True)
        return self


class NodeSelectorTerm(Model):
    match_expressions: list[NodeRequirement] = Field(
        min_length=1, max_length=16, description="Requirements, all of which must hold."
    )


class RequiredNodes(Model):
    node_selector_terms: list[NodeSelectorTerm] = Field(
        min_length=1, max_length=8, description="Terms, any one of which must hold."
    )


class PreferredNodes(Model):
    weight: int = Field(ge=1, le=100, description="1-100.")
    preference: NodeSelectorTerm = Field(description="The preferred nodes.")


class NodeAffinity(Model):
    required_during_scheduling_ignored_during_execution: RequiredNodes | None = Field(
        default=None, description="Nodes the pod must run on."
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredNodes] = Field(
        default_factory=list, max_length=8, description="Nodes the pod should run on."
    )


class LabelRequirement(Model):
    key: LabelKey = Field(description="Pod label key.")
    operator: str = Field(
        pattern=LABEL_OPERATORS, max_length=12, description="In, NotIn, Exists, DoesNotExist."
    )
    values: list[LabelValue] = Field(default_factory=list, max_length=32, description="Values.")

    @model_validator(mode="after")
    def _fits(self) -> Self:
        _values_fit(self.operator, self.values, numeric=False)
        return self


class LabelSelector(Model):
    """``matchExpressions`` only (``key In [value]`` says what ``matchLabels`` would):
    the CRD can check a list's keys, not a map's."""

    match_expressions: list[LabelRequirement] = Field(
        min_length=1, max_length=16, description="Requirements on the pods' labels, all of them."
    )


class PodAffinityTerm(Model):
    label_selector: LabelSelector = Field(description="The pods to keep away from.")
    topology_key: LabelKey = Field(
        description="Node label of the domain, e.g. kubernetes.io/hostname or "
        "topology.kubernetes.io/zone."
    )


class WeightedPodAffinityTerm(Model):
    weight: int = Field(ge=1, le=100, description="1-100.")
    pod_affinity_term: PodAffinityTerm = Field(description="The term.")


class PodAntiAffinity(Model):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(
        default_factory=list, max_length=8, description="Domains the pod must not share."
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list, max_length=8, description="Domains the pod should not share."
    )


class Affinity(Model):
    """Kubernetes' ``affinity``: node affinity and pod anti-affinity."""

    node_affinity: NodeAffinity | None = Field(default=None, description="Node affinity.")
    pod_anti_affinity: PodAntiAffinity | None = Field(
        default=None, description="Keep away from pods with some labels."
    )
