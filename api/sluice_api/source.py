"""Where a pipeline's records come from: ``spec.source``, exactly one of a Kafka
topic set read by explicit offset ranges or a Pub/Sub subscription pulled in bounded
batches, each with the caps that bound a micro-batch.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Self

from pydantic import Field, model_validator

from sluice_api.security import KafkaSecurity
from sluice_api.spec_base import HostPort, Model, SecretName


class StartingOffsets(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"


class OnOffsetOutOfRange(StrEnum):
    FAIL = "fail"
    EARLIEST = "earliest"


BOOTSTRAP_MAX: Final = 4096


class Backpressure(Model):
    """Rate control: the per-partition cap follows how long recent batches took."""

    enabled: bool = Field(
        default=False,
        description=(
            "Shrink or grow the per-partition cap of each micro-batch so that a batch takes "
            "about targetUtilization of trigger.intervalSeconds; never above "
            "maxRecordsPerPartition, never below 1."
        ),
    )
    target_utilization: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="Fraction of the trigger interval a batch should take (0 < x <= 1).",
    )
    initial_records_per_partition: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Cap of the first batch; default: maxRecordsPerPartition.",
    )


class KafkaSource(Model):
    """Where records come from: Kafka topics read by explicit offset ranges."""

    bootstrap_servers: str = Field(
        min_length=1,
        max_length=BOOTSTRAP_MAX,
        description="Comma-separated host:port list of Kafka brokers.",
    )
    topics: list[Annotated[str, Field(pattern=r"^[a-zA-Z0-9._-]{1,249}$", max_length=249)]] = Field(
        min_length=1, max_length=100, description="Topics to read; every partition is read."
    )
    starting_offsets: StartingOffsets = Field(
        default=StartingOffsets.EARLIEST,
        description=(
            "Where a pipeline without a checkpoint starts: earliest or latest. Partitions "
            "that appear later (added to a topic, while running or stopped) always start "
            "at their earliest offset, so none of their records is skipped."
        ),
    )
    max_records_per_partition: int = Field(
        default=50_000,
        ge=1,
        le=10_000_000,
        description="Cap on records read per partition in one micro-batch (bounded catch-up).",
    )
    on_offset_out_of_range: OnOffsetOutOfRange = Field(
        default=OnOffsetOutOfRange.FAIL,
        description=(
            "When retention deleted records past the checkpoint, or the checkpoint is beyond "
            "a partition's end (the topic was deleted and recreated): fail (stop, naming "
            "topic, partition and offsets; nothing is skipped silently) or earliest (skip "
            "to the oldest record, or read a recreated partition from its start: counted in "
            "sluice_records_skipped_total or sluice_offset_resets_total, logged, a "
            "RecordsLost or OffsetOutOfRange condition and Event, and for a planned batch "
            "the lost offsets in its history row; the batch keeps its id and end offsets)."
        ),
    )
    security: KafkaSecurity = Field(
        default_factory=lambda: KafkaSecurity(),
        description="How the driver connects to the brokers: plain, TLS, SASL or both.",
    )
    backpressure: Backpressure = Field(
        default_factory=Backpressure, description="Optional rate control of the per-partition cap."
    )
    commit_to_consumer_group: bool = Field(
        default=False,
        description=(
            "Also commit each batch's positions to the Kafka consumer group "
            "'sluice.<namespace>.<name>' so Kafka's lag tools show the pipeline; only "
            "informative: the driver never reads them back (it resumes from its checkpoint)."
        ),
    )


PUBSUB_PROJECT: Final = r"^[a-z][-a-z0-9.:]{1,99}$"
PUBSUB_NAME: Final = r"^[A-Za-z][-A-Za-z0-9_.~+%]{2,254}$"
"""A topic or subscription id, as Pub/Sub allows it (3 to 255 characters)."""
PUBSUB_MAX_MESSAGE_BYTES: Final = 10 * 1024 * 1024
"""Pub/Sub's limit on one message (data and attributes)."""


class PubSubSource(Model):
    """Where records come from: a Google Cloud Pub/Sub subscription, pulled in bounded
    batches; a message is acknowledged only once its batch is committed."""

    project: str = Field(
        pattern=PUBSUB_PROJECT, max_length=100, description="Google Cloud project id."
    )
    subscription: str = Field(
        pattern=PUBSUB_NAME,
        max_length=255,
        description="Subscription id in the project (a pull subscription).",
    )
    credentials_secret: SecretName | None = Field(
        default=None,
        description=(
            "Secret with key 'credentials.json' (a service-account key); default: "
            "Application Default Credentials (e.g. GKE workload identity)."
        ),
    )
    endpoint: HostPort | None = Field(
        default=None,
        description=(
            "host:port of a Pub/Sub server other than Google's: an emulator (without "
            "credentialsSecret: plaintext, no credentials, as emulators expect) or a "
            "private endpoint (with credentialsSecret: TLS)."
        ),
    )
    max_messages_per_batch: int = Field(
        default=5_000,
        ge=1,
        le=1_000_000,
        description="Cap on messages in one micro-batch (bounded catch-up).",
    )
    max_bytes_per_batch: int = Field(
        default=64 * 1024 * 1024,
        ge=PUBSUB_MAX_MESSAGE_BYTES,
        le=1024 * 1024 * 1024,
        description=(
            "Cap on the bytes of the messages (data and attributes) in one micro-batch; a "
            "message that would cross it waits, leased, for the next batch."
        ),
    )
    ack_deadline_seconds: int = Field(
        default=60,
        ge=10,
        le=600,
        description=(
            "The lease the driver asks for and renews, every third of it, on every "
            "message it holds until the message's batch is committed and acknowledged."
        ),
    )
    dedup_window_seconds: int = Field(
        default=86_400,
        ge=600,
        le=30 * 86_400,
        description=(
            "How long the ids of committed messages are kept (in the checkpoint "
            "keyspace) to drop a redelivery: a message delivered again within it counts "
            "once. It must cover the longest time a pipeline may be down between a "
            "commit and its acknowledgement (docs/pubsub.md)."
        ),
    )


class Source(Model):
    """Exactly one source."""

    kafka: KafkaSource | None = Field(default=None, description="Kafka source.")
    pubsub: PubSubSource | None = Field(default=None, description="Google Cloud Pub/Sub source.")

    @model_validator(mode="after")
    def exactly_one(self) -> Self:
        if (self.kafka is None) == (self.pubsub is None):
            raise ValueError("set exactly one of source.kafka or source.pubsub")
        return self
