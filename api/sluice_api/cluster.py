"""Which Kubernetes cluster a pipeline runs in, and the checkpoint key built from it.

Two clusters may run a pipeline of the same namespace and name against one
checkpoint keyspace (a platform with a cluster per region, or a blue/green pair of
clusters); keyed by ``namespace/name`` alone they would share one row and fence each
other. The operator therefore names its cluster (the UID of the ``kube-system``
Namespace, or the chart's ``operator.clusterName``) and the driver keys every row of
the checkpoint store by ``<cluster>/<namespace>/<name>``.

A cluster id never contains ``/`` and a namespace never does either, so a key of
this form is never equal to a legacy key (``<namespace>/<name>``, written by drivers
before cluster ids), which a driver adopts once (``sluice_job.checkpoint``).
"""

from __future__ import annotations

import re
from typing import Final

ID_PATTERN: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
ID_MAX_LENGTH: Final = 63
"""A UID (36 characters) or a DNS label-like name the platform picks."""


class ClusterIdError(ValueError):
    """A cluster id that cannot be part of a checkpoint key; names where it came from."""


def cluster_id(value: str, source: str) -> str:
    """``value`` if it is a usable cluster id; otherwise :class:`ClusterIdError`
    naming ``source`` (the option, value or variable it was read from)."""
    if not value:
        raise ClusterIdError(
            f"{source} is empty: the cluster's identity keys the checkpoint (the operator "
            "sets it from the kube-system Namespace's UID or operator.clusterName)"
        )
    if len(value) > ID_MAX_LENGTH or not ID_PATTERN.match(value):
        raise ClusterIdError(
            f"{source}={value!r} is not a cluster id: lower-case letters, digits, '-' and "
            f"'.', at most {ID_MAX_LENGTH} characters, starting and ending alphanumeric"
        )
    return value


def checkpoint_key(cluster: str, namespace: str, name: str) -> str:
    """The key of a pipeline's rows in the checkpoint, batches and claims tables."""
    return f"{cluster}/{namespace}/{name}"


def legacy_checkpoint_key(namespace: str, name: str) -> str:
    """The key drivers used before cluster ids: adopted once, never written again."""
    return f"{namespace}/{name}"
