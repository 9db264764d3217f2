"""What the driver and executor pods get and where they may run:
``spec.spark.driver`` and ``spec.spark.executors`` (cores, memory, scratch space,
tolerations, node selector and affinity).
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from sluice_api.affinity import Affinity
from sluice_api.pod import QUANTITY
from sluice_api.spec_base import CASSANDRA_MAX_TTL, Model

MEMORY = r"^[0-9]+[kmgtKMGT]?$"
SCRATCH_DEFAULT: Final = "2Gi"
CPU = r"^([0-9]{1,4}(\.[0-9]{1,3})?|[0-9]{1,7}m)$"


class Resources(Model):
    cores: int = Field(default=1, ge=1, le=64, description="CPU cores.")
    memory: str = Field(
        default="2g", pattern=MEMORY, max_length=16, description="JVM memory, e.g. 2g."
    )
    scratch: str = Field(
        default=SCRATCH_DEFAULT,
        pattern=QUANTITY,
        max_length=32,
        description=(
            "Local scratch space (Spark's shuffle spill and temporary files, in an emptyDir "
            "at /tmp): its size limit, and the pod's ephemeral-storage request and limit. "
            "Past it the kubelet evicts the pod."
        ),
    )


class Toleration(Model):
    """A Kubernetes toleration of the driver's or the executors' pods."""

    key: str | None = Field(
        default=None, max_length=317, description="Taint key; empty matches every key."
    )
    operator: str = Field(
        default="Equal", pattern=r"^(Equal|Exists)$", max_length=6, description="Equal or Exists."
    )
    value: str | None = Field(
        default=None, max_length=63, description="Taint value (operator Equal)."
    )
    effect: str | None = Field(
        default=None,
        pattern=r"^(NoSchedule|PreferNoSchedule|NoExecute)$",
        max_length=16,
        description="Taint effect; empty matches every effect.",
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        le=CASSANDRA_MAX_TTL,
        description="How long a NoExecute taint is tolerated.",
    )


class Placement(Model):
    """Where a pod may run: the same fields for the driver and for executor pods."""

    affinity: Affinity | None = Field(
        default=None,
        description="Node affinity and pod anti-affinity of the pods (Kubernetes' shape).",
    )
    node_selector: dict[str, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict, max_length=32, description="Node labels the pods must run on."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=32, description="Taints the pods tolerate."
    )


class Executors(Resources, Placement):
    instances: int = Field(
        default=0,
        ge=0,
        le=1000,
        description=(
            "Executor pods; 0 (the default) runs Spark inside the driver pod with its "
            "cores, and the driver gets no Kubernetes token."
        ),
    )


class Driver(Resources, Placement):
    cpu_limit: str | None = Field(
        default=None,
        pattern=CPU,
        max_length=32,
        description=(
            "CPU limit of the driver container (e.g. 2 or 1500m); default: none, the pod "
            "may use idle CPU beyond its request of 'cores'. Set it where a LimitRange "
            "or quota asks for limits."
        ),
    )
    memory_overhead: str | None = Field(
        default=None,
        pattern=MEMORY,
        max_length=16,
        description=(
            "Memory of the container beyond the JVM's 'memory' (Python workers, native "
            "buffers), e.g. 512m; default: 10% of memory, at least 384m (Spark's rule)."
        ),
    )
