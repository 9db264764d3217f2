"""Which cluster this operator runs in: the identity drivers key their checkpoint by.

Two Kubernetes clusters may run pipelines of the same namespace and name against one
checkpoint keyspace; the cluster id keeps their rows apart (``sluice_api.cluster``).
By convention a cluster's identity is the UID of its ``kube-system`` Namespace: it
exists in every cluster, never changes while the cluster lives, and reading it takes
``get`` on that one Namespace (the chart grants exactly that). The platform may name
the cluster instead (``--cluster-name``, the chart's ``operator.clusterName``), for
instance to move pipelines to a replacement cluster on purpose: the new cluster's
drivers then find the old cluster's rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from kubernetes.client.exceptions import ApiException

from sluice_api import cluster

SYSTEM_NAMESPACE: Final = "kube-system"


class ClusterIdUnknownError(Exception):
    """No cluster id: the operator cannot start drivers without one."""


def resolve(configured: str, namespace_uid: Callable[[str], str]) -> str:
    """``configured`` (``--cluster-name``) when given, else the ``kube-system``
    Namespace's UID read with ``namespace_uid``; validated either way."""
    if configured:
        return cluster.cluster_id(configured, "--cluster-name (operator.clusterName)")
    try:
        uid = namespace_uid(SYSTEM_NAMESPACE)
    except ApiException as err:
        raise ClusterIdUnknownError(
            f"cannot read Namespace {SYSTEM_NAMESPACE} for the cluster id ({err.status} "
            f"{err.reason}): grant get on namespaces/{SYSTEM_NAMESPACE} (the chart does) or "
            "set --cluster-name (operator.clusterName)"
        ) from None
    return cluster.cluster_id(uid, f"the UID of Namespace {SYSTEM_NAMESPACE}")
