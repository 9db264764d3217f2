"""Names and labels of the objects the operator creates for a pipeline.

One place decides them, so builders, observers and tests agree. Pod names carry
the epoch (``<pipeline>-driver-<epoch>``): each driver generation is a new pod, and
an old pod on a lost node can never be confused with its successor.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "sluice.dev"
VERSION: Final = "v1alpha1"
PLURAL: Final = "streamingpipelines"
KIND: Final = "StreamingPipeline"

LABEL_PIPELINE: Final = "sluice.dev/pipeline"
LABEL_ROLE: Final = "sluice.dev/role"
LABEL_EPOCH: Final = "sluice.dev/epoch"
ANNOTATION_EPOCH: Final = "sluice.dev/epoch"
ANNOTATION_SPEC_HASH: Final = "sluice.dev/spec-hash"
ROLE_DRIVER: Final = "driver"
MANAGED_BY: Final = "sluice-operator"

MAX_NAME: Final = 63


def driver_pod(pipeline: str, epoch: int) -> str:
    suffix = f"-driver-{epoch}"
    return pipeline[: MAX_NAME - len(suffix)].rstrip("-") + suffix


def driver_service(pipeline: str) -> str:
    return _with_suffix(pipeline, "-driver")


def service_account(pipeline: str) -> str:
    return _with_suffix(pipeline, "-driver")


def _with_suffix(pipeline: str, suffix: str) -> str:
    return pipeline[: MAX_NAME - len(suffix)].rstrip("-") + suffix


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
