"""The StreamingPipeline ``status``: every field the operator writes, as one model.

The operator writes it (its write-ahead log: written before it acts, so a restarted
operator resumes where it stopped) and the CRD's status schema is generated from it,
so ``kubectl explain streamingpipelines.status`` documents every field and the API
server keeps nothing it does not describe. The lifecycle phases and stop reasons live
here too: users and alerts read them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Phase(StrEnum):
    PENDING = "Pending"
    STARTING = "Starting"
    RUNNING = "Running"
    UPGRADING = "Upgrading"
    STOPPING = "Stopping"
    SUSPENDED = "Suspended"
    RECOVERING = "Recovering"
    FAILED = "Failed"


class StopReason(StrEnum):
    UPGRADE = "upgrade"
    SUSPEND = "suspend"
    DELETE = "delete"


EXECUTOR_SECRETS_MAX: Final = 256
"""More than an executor pod template can name: the Spark RPC secret, and at most 128
env, 16 envFrom, 16 volumes and 8 pull secrets of spark.pod."""


MAX_MESSAGE: Final = 1024
"""The longest message the status holds (``message``, each condition's, ``rolledBack.reason``,
``standby.message``). Drivers run a tenant's code and their exit messages and reports
reach these fields: the operator cuts longer ones (``bounded``), the schema refuses them."""


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text``, or its start and how many characters were cut, within ``limit``."""
    if len(text) <= limit:
        return text
    kept = limit - len(f"… ({len(text)} more characters)")
    return f"{text[:kept]}… ({len(text) - kept} more characters)"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class LastCommit(_Model):
    """The newest micro-batch whose offsets were committed."""

    batch_id: int = Field(ge=0, description="Id of the batch.")
    time: str = Field(
        description="When it was committed.", json_schema_extra={"format": "date-time"}
    )
    epoch: int | None = Field(
        default=None,
        ge=0,
        description="Epoch of the driver that reported it: the one that committed it, or "
        "one that claimed the checkpoint holding it. A newer epoch's report replaces it at "
        "once, an older (fenced) epoch's never does.",
    )


class Lag(_Model):
    """How far the running driver is behind its source, as it last reported it."""

    records: int = Field(
        ge=0,
        description="Kafka: records from where the driver reads (the committed offsets; "
        "before any commit, where startingOffsets places it) up to the last stable "
        "offsets, summed over partitions, from the driver's claim on and while a batch "
        "runs. Pub/Sub: messages pulled and not yet acknowledged (the subscription's "
        "backlog is in Cloud Monitoring).",
    )
    oldest_message_age_seconds: int | None = Field(
        default=None,
        ge=0,
        description="Pub/Sub: seconds since the oldest message the driver holds "
        "unacknowledged was published.",
    )
    time: str = Field(
        description="When the operator read it from the driver.",
        json_schema_extra={"format": "date-time"},
    )


class GoodSpec(_Model):
    """The last spec whose driver committed a batch: where an automatic rollback returns."""

    spec_hash: str = Field(description="Hash of its driver fields (as status.specHash).")
    image: str = Field(description="Its job image.")
    spec: str = Field(
        description="JSON of the spec fields the driver reads (all but upgrade, failover, "
        "restart and suspend, which keep following the manifest during a rollback)."
    )


class Rollback(_Model):
    """An upgrade that failed and was rolled back; it stays rolled back until the
    driver fields of the spec change again."""

    image: str = Field(description="Job image of the failed upgrade.")
    spec_hash: str = Field(description="Hash of the failed spec's driver fields.")
    reason: str = Field(
        max_length=MAX_MESSAGE, description="Why it counted as failed: the last failure."
    )
    time: str = Field(
        description="When the operator rolled back.", json_schema_extra={"format": "date-time"}
    )


class AppliedOffsetReset(_Model):
    """The last spec.offsetReset a driver applied (or found applied) before committing."""

    id: str = Field(description="spec.offsetReset.id of the reset.")
    to: str = Field(description="spec.offsetReset.to of the reset.")
    epoch: int = Field(ge=0, description="Epoch of the driver that committed after it.")
    time: str = Field(
        description="When the operator saw that driver commit.",
        json_schema_extra={"format": "date-time"},
    )


class StandbyState(StrEnum):
    STARTING = "Starting"
    READY = "Ready"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class StandbyPurpose(StrEnum):
    UPGRADE = "Upgrade"
    """The new spec's driver of a warm handover (spec.upgrade.mode: WarmHandover)."""
    FAILOVER = "Failover"
    """A hot standby of the running spec (spec.standby: 1), promoted when the driver fails."""


class Standby(_Model):
    """A driver started in standby: the new spec's of a warm handover
    (spec.upgrade.mode: WarmHandover), or a hot standby for failover (spec.standby: 1)."""

    pod: str = Field(description="Name of the standby's pod.")
    epoch: int = Field(ge=1, description="The epoch it claims when it takes over.")
    spec_hash: str = Field(description="Hash of the spec fields it was started with.")
    image: str = Field(description="Its job image.")
    state: StandbyState = Field(
        description=(
            "Starting (not ready yet; the running driver goes on), Ready (the running "
            "driver was asked to stop; the standby takes over once it has released), "
            "Failed (it never became ready: the upgrade failed, the running driver goes "
            "on), Cancelled (the spec changed again, or the pipeline stopped)."
        )
    )
    message: str | None = Field(
        default=None, max_length=MAX_MESSAGE, description="Why it failed or was cancelled."
    )
    purpose: StandbyPurpose = Field(
        default=StandbyPurpose.UPGRADE,
        description=(
            "Upgrade (the new spec's driver, taking over once ready) or Failover (a hot "
            "standby of the running spec, promoted when the driver fails, is deleted or "
            "its node is lost)."
        ),
    )
    failures: int = Field(
        default=0, ge=0, description="Failover standbys that failed in a row (restart backoff)."
    )
    since: str | None = Field(
        default=None, description="When it entered its state (RFC 3339): the backoff's start."
    )


class Condition(_Model):
    """An observation of one aspect of the pipeline (Ready, Fenced, ...)."""

    type: str = Field(description="What the condition is about, e.g. Ready.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(default=None, description="One CamelCase word saying why.")
    message: str | None = Field(
        default=None, max_length=MAX_MESSAGE, description="What happened, for humans."
    )
    last_transition_time: str | None = Field(
        default=None,
        description="When the status last changed.",
        json_schema_extra={"format": "date-time"},
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation this condition is about."
    )


class PipelineStatus(_Model):
    """Observed state, written by the operator (its write-ahead log: written before it acts, so a restarted operator resumes where it stopped)."""  # noqa: E501

    phase: Phase | None = Field(default=None, description="Lifecycle phase of the pipeline.")
    epoch: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Epoch of the current driver: increases with every driver pod, and fences the "
            "drivers of older epochs out of the checkpoint store."
        ),
    )
    driver_pod: str | None = Field(default=None, description="Name of the current driver pod.")
    image: str | None = Field(default=None, description="Job image of the current driver.")
    spec_hash: str | None = Field(
        default=None,
        description=(
            "Hash of the spec fields the current driver was started with; a change of "
            "them is an upgrade (clean stop, then a new driver)."
        ),
    )
    stop_reason: StopReason | None = Field(
        default=None,
        description="Why the operator asked the current driver to stop, while it stops.",
    )
    failures: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Failed drivers in a row; reset once a driver has run stably. The pipeline is "
            "Failed when it reaches spec.restart.maxFailures."
        ),
    )
    next_start_at: str | None = Field(
        default=None,
        description="When the next driver may start (restart backoff).",
        json_schema_extra={"format": "date-time"},
    )
    restarts: int | None = Field(
        default=None, ge=0, description="Driver pods restarted after a failure."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation the operator last acted on."
    )
    last_commit: LastCommit | None = Field(
        default=None, description="The newest micro-batch whose offsets were committed."
    )
    lag: Lag | None = Field(
        default=None,
        description="Records behind Kafka, from the running driver; refreshed at most every "
        "few seconds while it changes.",
    )
    message: str | None = Field(
        default=None,
        max_length=MAX_MESSAGE,
        description="Why the pipeline is in its phase, for humans.",
    )
    last_good_spec: GoodSpec | None = Field(
        default=None,
        description="The last spec whose driver committed a batch (spec.upgrade.rollback).",
    )
    rolled_back: Rollback | None = Field(
        default=None, description="The failed upgrade the pipeline rolled back from, if any."
    )
    offset_reset: AppliedOffsetReset | None = Field(
        default=None, description="The last offset reset in effect (spec.offsetReset)."
    )
    executor_secrets: list[Annotated[str, Field(max_length=253)]] | None = Field(
        default=None,
        max_length=EXECUTOR_SECRETS_MAX,
        description=(
            "The Secrets the current driver's executor pods may name (its pod template's: "
            "the pipeline's Spark RPC secret and the Secrets of spark.pod), written before "
            "the driver is created; the chart's admission policy refuses an executor pod "
            "its driver creates naming any other. Unset without executors."
        ),
    )
    standby: Standby | None = Field(
        default=None,
        description=(
            "The standby driver (warm handover or hot standby), or the last one's outcome."
        ),
    )
    conditions: list[Condition] | None = Field(
        default=None, description="Current conditions of the pipeline, one per type."
    )


def wire_fields() -> frozenset[str]:
    """The camelCase names of every status field."""
    return frozenset(field.alias or name for name, field in PipelineStatus.model_fields.items())
