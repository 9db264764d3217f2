"""The StreamingPipeline ``spec``: one model shared by the driver and the operator.

This is the single source of truth for what a user writes (the manifest; see
``examples/`` and ``docs/design.md``): the driver parses its configuration with it,
the operator validates and builds pods from it, and the CRD's schema is generated
from it. It depends on pydantic only, never on Spark or Kubernetes, so both
processes can import it.

Field names are snake_case in Python and camelCase on the wire (``by_alias``).

Here is the top-level model, ``PipelineSpec``, with the checks that span its sections;
each section is a module of its own (``source``, ``transform``, ``sink``,
``dead_letter``, ``checkpoint``, ``trigger``, ``spark``, ``replacement``,
``offset_reset``), and so is what they share (``spec_base``, ``security``).
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, field_validator, model_validator

from sluice_api.checkpoint import Checkpoint
from sluice_api.dead_letter import DeadLetter, KafkaDeadLetter
from sluice_api.offset_reset import OffsetReset
from sluice_api.replacement import Failover, Restart, Upgrade
from sluice_api.sink import Sink
from sluice_api.source import KafkaSource, Source
from sluice_api.spark import Spark
from sluice_api.spec_base import Model
from sluice_api.transform import Transform
from sluice_api.trigger import Trigger


class PipelineSpec(Model):
    """``spec`` of a StreamingPipeline."""

    image: str = Field(
        min_length=1, max_length=512, description="Job image; changing it is a code upgrade."
    )
    source: Source = Field(description="Where records come from.")
    transform: Transform = Field(description="User transformation.")
    sink: Sink = Field(description="Where results go (exactly one of cassandra, datastore).")
    dead_letter: DeadLetter | None = Field(
        default=None,
        description=(
            "Where records the transform rejects go. Unset, a batch with rejects fails "
            "(nothing is dropped silently)."
        ),
    )
    checkpoint: Checkpoint = Field(description="Where offsets are committed.")
    trigger: Trigger = Field(default_factory=Trigger, description="Micro-batch timing.")
    spark: Spark = Field(default_factory=Spark, description="Spark resources and configuration.")
    upgrade: Upgrade = Field(
        default_factory=Upgrade, description="How a spec change replaces the driver."
    )
    failover: Failover = Field(default_factory=Failover, description="Node-loss failover.")
    standby: int = Field(
        default=0,
        ge=0,
        le=1,
        description=(
            "Hot standbys (0 or 1). With 1, a second driver of the running spec is started "
            "and kept ready (Spark, Kafka, the stores, the transform checked and kept warm), "
            "preferably on another node; it never plans or writes. When the driver's pod "
            "fails, is deleted or its node is lost, the operator promotes the standby (a new "
            "epoch, fencing the old driver) instead of starting a pod from nothing, then "
            "starts a new standby. Costs a second driver's memory and a little CPU."
        ),
    )
    restart: Restart = Field(default_factory=Restart, description="Restart backoff.")
    suspend: bool = Field(default=False, description="Stop the driver cleanly and stay stopped.")
    restart_nonce: str = Field(
        default="",
        max_length=253,
        description=(
            "Set to a new value to restart the driver without changing anything else: a "
            "clean stop (finish the batch, commit, exit) and a new driver with the next "
            "epoch, as for an upgrade; also how a Failed pipeline is retried as it is."
        ),
    )
    offset_reset: OffsetReset | None = Field(
        default=None,
        description=(
            "Replay or skip: move the committed positions once (per id), under a new "
            "epoch, recorded in the batch history. Set by `sluice offsets reset`."
        ),
    )

    @property
    def kafka(self) -> KafkaSource:
        """``source.kafka``, for code that runs only with a Kafka source."""
        if self.source.kafka is None:
            raise ValueError("source.kafka is not set (the pipeline reads Pub/Sub)")
        return self.source.kafka

    @property
    def kafka_dead_letter(self) -> KafkaDeadLetter | None:
        return self.dead_letter.kafka if self.dead_letter is not None else None

    @model_validator(mode="after")
    def rate_control_needs_an_interval(self) -> Self:
        kafka = self.source.kafka
        if kafka and kafka.backpressure.enabled and self.trigger.interval_seconds <= 0:
            raise ValueError(
                "source.kafka.backpressure.enabled needs trigger.intervalSeconds > 0: "
                "the cap is sized to a fraction of the interval"
            )
        return self

    @model_validator(mode="after")
    def low_latency_fits(self) -> Self:
        if not self.trigger.low_latency:
            return self
        if self.trigger.interval_seconds != 0:
            raise ValueError(
                "trigger.mode LowLatency needs trigger.intervalSeconds: 0: it starts each "
                "batch as soon as the last one commits"
            )
        if self.source.kafka is None:
            raise ValueError(
                "trigger.mode LowLatency needs source.kafka: a Pub/Sub pipeline runs "
                "in the Default mode"
            )
        return self

    @model_validator(mode="after")
    def dead_letters_fit_the_source(self) -> Self:
        target, kafka = self.kafka_dead_letter, self.source.kafka
        if self.dead_letter is not None and self.dead_letter.pubsub and kafka is not None:
            raise ValueError("deadLetter.pubsub needs source.pubsub: use deadLetter.kafka")
        if target is not None and kafka is None and target.bootstrap_servers is None:
            raise ValueError(
                "deadLetter.kafka.bootstrapServers is required with a Pub/Sub source "
                "(there are no source brokers to default to)"
            )
        if target is None or kafka is None:
            return self
        if target.bootstrap_servers not in (None, kafka.bootstrap_servers):
            return self
        if target.topic in kafka.topics:
            raise ValueError(
                "deadLetter.kafka.topic must not be one of source.kafka.topics: rejected "
                "records would be read again, and rejected again, forever"
            )
        return self

    @model_validator(mode="after")
    def reset_names_source_topics(self) -> Self:
        reset = self.offset_reset
        if reset is not None and self.source.kafka is None:
            raise ValueError(
                "offsetReset needs source.kafka: a Pub/Sub subscription has no offsets "
                "(seek the subscription instead)"
            )
        unknown = sorted(
            {p.topic for p in (reset.offsets or [])} - set(self.kafka.topics) if reset else set()
        )
        if unknown:
            raise ValueError(
                f"offsetReset.offsets names {', '.join(unknown)}, not in source.kafka.topics"
            )
        return self

    @field_validator("image")
    @classmethod
    def no_whitespace(cls, value: str) -> str:
        if value.strip() != value or " " in value:
            raise ValueError("image must not contain whitespace")
        return value
