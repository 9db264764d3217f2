"""Scheduling and identity settings of a pipeline's pods, held to the platform's policy.

A pod's priority class, tolerations, node selector and node affinity, labels and
annotations are one line of a manifest each, yet each reaches past the tenant's own
namespace: a priority class preempts other tenants' pods; a toleration with operator
``Exists`` and no key tolerates every taint, and with a node selector puts the driver
on the control plane or on another team's dedicated nodes; a label or annotation is
what other controllers read as identity or configuration (``iam.amazonaws.com/role``
and ``aadpodidbinding`` lend a cloud identity, ``sidecar.istio.io/inject`` takes the
pod out of the mesh, ``container.apparmor.security.beta.kubernetes.io/*: unconfined``
drops its AppArmor profile). The CRD refuses only the names no platform would give
(``system-*`` priority classes, the operator's own labels); what a tenant may set
beyond them is the platform's to say.

So the operator takes what the platform allows from its command line (the chart's
``operator.podPolicy``), and before it creates any pod of a pipeline (a driver, a
standby; the executors' template is the driver's, from the same spec) it refuses a
spec that sets anything else, naming the field and the value. Default: nothing
beyond what the platform lists.

:func:`refusals` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from sluice_api.affinity import NodeRequirement, NodeSelectorTerm
from sluice_api.resources import Placement
from sluice_api.spec import PipelineSpec

CONDITION: Final = "PodSettingsAllowed"
REASON: Final = "NotAllowed"
EVENT: Final = "PodSettingNotAllowed"
ANY: Final = "*"
"""In a list of keys: every key; a pattern ending in it: every key with that prefix."""
GUARDED_KEYS: Final = (
    "iam.amazonaws.com/role",
    "aadpodidbinding",
    "azure.workload.identity/",
    "eks.amazonaws.com/",
    "iam.gke.io/",
    "container.apparmor.security.beta.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/",
    "sidecar.istio.io/",
    "linkerd.io/",
)
"""Label and annotation keys (or prefixes, ending in ``/``) that lend a cloud identity
or weaken the pod's isolation: a bare ``*`` does not admit them; a platform that
means to allow one lists it (or its prefix) by name."""


@dataclass(frozen=True)
class PodPolicy:
    """What a pipeline's pods may carry beyond the operator's own settings."""

    priority_classes: frozenset[str] = frozenset()
    """PriorityClass names ``spark.pod.priorityClassName`` may name."""
    toleration_keys: frozenset[str] = frozenset()
    """Taint keys the pods may tolerate; ``*``: any, and a toleration without a key
    (which tolerates every taint)."""
    node_labels: frozenset[str] = frozenset()
    """Node labels a node selector or node affinity may name: ``key`` (any value) or
    ``key=value``."""
    label_keys: tuple[str, ...] = ()
    """Label keys of the pods: a key, or a prefix ending in ``*`` (``example.com/*``)."""
    annotation_keys: tuple[str, ...] = ()
    """Annotation keys of the pods, written as :attr:`label_keys` are."""


NOTHING: Final = PodPolicy()
"""The default: none of these settings."""
FLAGS: Final = {
    "priority_classes": "--allowed-priority-classes",
    "toleration_keys": "--allowed-toleration-keys",
    "node_labels": "--allowed-node-labels",
    "label_keys": "--allowed-pod-labels",
    "annotation_keys": "--allowed-pod-annotations",
}
"""The operator's flag for each field of :class:`PodPolicy`, named in refusals."""


def refusals(spec: PipelineSpec, policy: PodPolicy) -> tuple[str, ...]:
    """Why the pods of ``spec`` may not be created under ``policy``, one line per field
    and value, in spec order; empty if they may."""
    pod = spec.spark.pod
    said: list[str] = []
    name = pod.priority_class_name
    if name is not None and name not in policy.priority_classes:
        said.append(
            f"spark.pod.priorityClassName: {name!r} is not a PriorityClass the platform "
            f"allows ({_allowed(policy, 'priority_classes')})"
        )
    for role, placement in (("driver", spec.spark.driver), ("executors", spec.spark.executors)):
        said += _placement(f"spark.{role}", placement, policy)
    said += _keys("spark.pod.labels", pod.labels, policy.label_keys, "label_keys", policy)
    said += _keys(
        "spark.pod.annotations", pod.annotations, policy.annotation_keys, "annotation_keys", policy
    )
    return tuple(said)


def _allowed(policy: PodPolicy, field: str) -> str:
    listed: Iterable[str] = getattr(policy, field)
    return f"allowed: {', '.join(sorted(listed)) or 'none'}; the operator's {FLAGS[field]}"


def _placement(where: str, placement: Placement, policy: PodPolicy) -> Iterator[str]:
    for i, toleration in enumerate(placement.tolerations):
        if ANY in policy.toleration_keys:
            continue
        if not toleration.key:
            yield (
                f"{where}.tolerations[{i}]: a toleration with operator {toleration.operator} "
                f"and no key tolerates every taint ({_allowed(policy, 'toleration_keys')})"
            )
        elif toleration.key not in policy.toleration_keys:
            yield (
                f"{where}.tolerations[{i}]: taint key {toleration.key!r} is not one the "
                f"platform lets pods tolerate ({_allowed(policy, 'toleration_keys')})"
            )
    for key, value in placement.node_selector.items():
        if key not in policy.node_labels and f"{key}={value}" not in policy.node_labels:
            yield (
                f"{where}.nodeSelector: node label {key}={value} is not one the platform "
                f"lets pods choose nodes by ({_allowed(policy, 'node_labels')})"
            )
    for path, requirement in _node_requirements(where, placement):
        if not _requirement_allowed(requirement, policy.node_labels):
            values = f" {', '.join(requirement.values)}" if requirement.values else ""
            yield (
                f"{path}: node label {requirement.key} {requirement.operator}{values} is not "
                f"one the platform lets pods choose nodes by ({_allowed(policy, 'node_labels')})"
            )


def _node_requirements(where: str, placement: Placement) -> Iterator[tuple[str, NodeRequirement]]:
    nodes = placement.affinity.node_affinity if placement.affinity is not None else None
    if nodes is None:
        return
    base = f"{where}.affinity.nodeAffinity"
    terms: list[tuple[str, NodeSelectorTerm]] = []
    required = nodes.required_during_scheduling_ignored_during_execution
    if required is not None:
        prefix = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms += [(f"{prefix}[{i}]", term) for i, term in enumerate(required.node_selector_terms)]
    preferred = nodes.preferred_during_scheduling_ignored_during_execution
    prefix = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
    terms += [(f"{prefix}[{i}].preference", p.preference) for i, p in enumerate(preferred)]
    for path, term in terms:
        for j, requirement in enumerate(term.match_expressions):
            yield f"{path}.matchExpressions[{j}]", requirement


def _requirement_allowed(requirement: NodeRequirement, allowed: frozenset[str]) -> bool:
    """A key listed bare admits any requirement on it; ``key=value`` entries admit
    ``In`` with those values only (any other operator picks nodes by the key alone)."""
    if requirement.key in allowed:
        return True
    return requirement.operator == "In" and all(
        f"{requirement.key}={value}" in allowed for value in requirement.values
    )


def _keys(
    where: str,
    given: Mapping[str, str],
    patterns: tuple[str, ...],
    field: str,
    policy: PodPolicy,
) -> Iterator[str]:
    for key, value in given.items():
        if not key_allowed(key, patterns):
            yield (
                f"{where}: key {key} (value {_short(value)!r}) is not one the platform allows "
                f"({_allowed(policy, field)})"
            )


def _short(value: str, most: int = 64) -> str:
    return value if len(value) <= most else value[: most - 3] + "..."


def key_allowed(key: str, patterns: Iterable[str]) -> bool:
    """Whether a label or annotation ``key`` matches one of ``patterns``: the key
    itself, or a prefix ending in ``*``; a bare ``*`` matches every key but the
    :data:`GUARDED_KEYS`."""
    for pattern in patterns:
        if pattern == ANY:
            if not guarded(key):
                return True
        elif pattern == key or (pattern.endswith(ANY) and key.startswith(pattern[:-1])):
            return True
    return False


def guarded(key: str) -> bool:
    return any(key == g or (g.endswith("/") and key.startswith(g)) for g in GUARDED_KEYS)
