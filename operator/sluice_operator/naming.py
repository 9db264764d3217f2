"""Names and labels of the objects the operator creates for a pipeline.

One place decides them, so builders, observers and tests agree. Pod names carry
the epoch (``<pipeline>-driver-<epoch>``): each driver generation is a new pod, and
an old pod on a lost node can never be confused with its successor.
"""

from __future__ import annotations

import hashlib
from typing import Final

from sluice_api.names import (
    ANNOTATION_EPOCH,
    ANNOTATION_SPEC_HASH,
    GROUP,
    KIND,
    LABEL_EPOCH,
    LABEL_PIPELINE,
    LABEL_ROLE,
    MANAGED_BY,
    PLURAL,
    ROLE_DRIVER,
    ROLE_EXECUTOR,
    VERSION,
)

__all__ = [
    "ANNOTATION_EPOCH",
    "ANNOTATION_SPEC_HASH",
    "GROUP",
    "KIND",
    "LABEL_EPOCH",
    "LABEL_PIPELINE",
    "LABEL_ROLE",
    "MANAGED_BY",
    "PLURAL",
    "ROLE_DRIVER",
    "ROLE_EXECUTOR",
    "VERSION",
    "driver_pod",
    "driver_service",
    "executor_labels",
    "executor_pod_prefix",
    "labels",
    "selector",
    "service_account",
    "spark_auth_secret",
]

MAX_NAME: Final = 63


def driver_pod(pipeline: str, epoch: int) -> str:
    return fit(pipeline, f"-driver-{epoch}", MAX_NAME)


def driver_service(pipeline: str) -> str:
    return _with_suffix(pipeline, "-driver")


def service_account(pipeline: str) -> str:
    return _with_suffix(pipeline, "-driver")


def executor_service_account(pipeline: str) -> str:
    return _with_suffix(pipeline, "-executor")


def spark_auth_secret(pipeline: str) -> str:
    """The Secret holding Spark's RPC secret of a pipeline with executors."""
    return _with_suffix(pipeline, "-spark-auth")


EXECUTOR_PREFIX_MAX: Final = 47
"""Spark's limit on ``spark.kubernetes.executor.podNamePrefix`` (pods are named
``<prefix>-exec-<id>``, at most 63 characters)."""


def executor_pod_prefix(pipeline: str, epoch: int) -> str:
    """``<pipeline>-e<epoch>``: executor pods are named after their driver's
    generation, so a fenced driver's executors are never mistaken for the new ones.
    Dots (valid in a pipeline's name, not in a pod's DNS label) become dashes."""
    return fit(pipeline.replace(".", "-"), f"-e{epoch}", EXECUTOR_PREFIX_MAX, whole=pipeline)


def executor_labels(pipeline: str, epoch: int) -> dict[str, str]:
    """Labels of a driver generation's executor pods: never the drivers' selector."""
    return {
        "app.kubernetes.io/name": "sluice-executor",
        "app.kubernetes.io/instance": pipeline,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_PIPELINE: pipeline,
        LABEL_ROLE: ROLE_EXECUTOR,
        LABEL_EPOCH: str(epoch),
    }


def _with_suffix(pipeline: str, suffix: str) -> str:
    return fit(pipeline, suffix, MAX_NAME)


def fit(name: str, suffix: str, limit: int, whole: str | None = None) -> str:
    """``name`` + ``suffix``, or, where that is longer than ``limit``, the start of
    ``name``, a hash of the ``whole`` name and ``suffix``: two pipelines that share
    their first characters never share an object (or executor pods) by being cut."""
    if len(name) + len(suffix) <= limit:
        return name + suffix
    digest = hashlib.sha256((whole or name).encode()).hexdigest()[:HASH_CHARS]
    head = name[: limit - len(suffix) - HASH_CHARS - 1].rstrip("-")
    return f"{head}-{digest}{suffix}"


HASH_CHARS: Final = 6


def selector(pipeline: str) -> dict[str, str]:
    """Labels selecting the driver pods of ``pipeline`` (every epoch)."""
    return {LABEL_PIPELINE: pipeline, LABEL_ROLE: ROLE_DRIVER}


def labels(pipeline: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "sluice-driver",
        "app.kubernetes.io/instance": pipeline,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        **selector(pipeline),
    }
