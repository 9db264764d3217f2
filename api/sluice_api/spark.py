"""Spark's part of a pipeline: ``spec.spark``, its pods' resources and additions, the
web UI, event logs and the tuning settings, with the checks across them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Self

from pydantic import Field, field_validator, model_validator

from sluice_api.pod import PodSettings
from sluice_api.resources import Driver, Executors
from sluice_api.spark_conf import (
    CODEC_KEY,
    SPARK_CONF_CODECS,
    SPARK_CONF_MAX,
    spark_conf_allowed,
)
from sluice_api.spec_base import Model

EVENT_LOG_DIR: Final = r"^(/.*|[a-zA-Z][-a-zA-Z0-9+.]*://.+)$"
UI_PORT: Final = 4040


def event_log_mounted(path: str, pod: PodSettings) -> bool:
    """Whether ``path`` is at or under a writable mount of ``pod``."""
    return any(
        (path == m.mount_path or path.startswith(m.mount_path.rstrip("/") + "/"))
        and not m.read_only
        for m in pod.volume_mounts
    )


class SparkUi(Model):
    enabled: bool = Field(
        default=False,
        description=(
            "Serve Spark's web UI on the driver's port 4040 (port 'ui' of the driver pod and "
            "its Service; reach it with kubectl port-forward). Off by default: a pipeline "
            "runs millions of jobs and nobody browses them."
        ),
    )


class EventLog(Model):
    dir: str | None = Field(
        default=None,
        pattern=EVENT_LOG_DIR,
        max_length=1024,
        description=(
            "Where Spark writes its event logs for a History Server (rolling files of "
            "128 MiB): an absolute path on a writable volume of spark.pod (one the History "
            "Server reads too), or a Hadoop filesystem URI the image can write. Unset: no "
            "event logs."
        ),
    )


class Jit(StrEnum):
    """The Spark JVMs' just-in-time compilers (``spec.spark.jit``)."""

    C1 = "C1"
    """The client compiler only (``-XX:TieredStopAtLevel=1``): quick compiles, no
    optimising recompiles."""
    TIERED = "Tiered"
    """The JVM's default: C1, then C2's optimising compiles of the hottest code."""


JIT_OPTIONS: Final = {Jit.C1: "-XX:TieredStopAtLevel=1", Jit.TIERED: ""}
"""The JVM option of each choice, for the driver's and the executors' JVMs."""


class Spark(Model):
    driver: Driver = Field(
        default_factory=Driver, description="Driver pod resources and placement."
    )
    executors: Executors = Field(default_factory=Executors, description="Executor resources.")
    pod: PodSettings = Field(
        default_factory=PodSettings,
        description=(
            "Additions to the pipeline's pods: env, envFrom, volumes and mounts, pull secrets "
            "and policy, labels, annotations, priority class (docs/pod-settings.md)."
        ),
    )
    ui: SparkUi = Field(default_factory=SparkUi, description="Spark's web UI on the driver.")
    event_log: EventLog = Field(
        default_factory=EventLog, description="Spark event logs for a History Server."
    )
    jit: Jit = Field(
        default=Jit.C1,
        description=(
            "The JVMs' just-in-time compilers (driver and executors). C1 (the default): "
            "quick compiles only; a driver's start and first batch cost about 40 % less CPU, "
            "and its batches of a few thousand records less too, since C2's recompiles of "
            "Spark's code cost more than they save (docs/tuning.md). Tiered: the JVM's own "
            "default, C1 then C2, for transforms whose JVM-side work dominates (large joins "
            "or aggregations in one batch)."
        ),
    )
    conf: dict[str, Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict,
        max_length=SPARK_CONF_MAX,
        description=(
            "Spark settings to tune (docs/tuning.md lists those a pipeline may set: memory, "
            "parallelism, shuffle, compression, SQL tuning, timeouts, the UI; the master, "
            "identity, pods, volumes, jars, plugins and JVM options are the operator's)."
        ),
    )

    @field_validator("conf")
    @classmethod
    def only_tuning(cls, value: dict[str, str]) -> dict[str, str]:
        refused = sorted(key for key in value if not spark_conf_allowed(key))
        if refused:
            raise ValueError(
                f"spark.conf may not set {', '.join(refused)} (the operator's alone); "
                "allowed: the settings docs/tuning.md lists"
            )
        codec = value.get(CODEC_KEY)
        if codec is not None and codec not in SPARK_CONF_CODECS:
            raise ValueError(
                f"spark.conf {CODEC_KEY} may be {', '.join(SPARK_CONF_CODECS)}, not {codec!r}"
            )
        return value

    @model_validator(mode="after")
    def _event_log_on_a_volume(self) -> Self:
        path = self.event_log.dir
        if path and path.startswith("/") and not event_log_mounted(path, self.pod):
            raise ValueError(
                f"spark.eventLog.dir {path!r} is not on a writable volume of "
                "spark.pod.volumeMounts (the root filesystem is read-only)"
            )
        return self

    @model_validator(mode="after")
    def _account_without_executors(self) -> Self:
        if self.pod.service_account_name and self.executors.instances > 0:
            raise ValueError(
                "spark.pod.serviceAccountName is for drivers without executors: a driver "
                "that runs executor pods uses the account the operator binds for it"
            )
        return self
