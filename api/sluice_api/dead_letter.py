"""Where the records a transform rejects go: ``spec.deadLetter``, exactly one of a
Kafka or a Pub/Sub topic, and which connection security a Kafka one uses.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from sluice_api.security import KafkaSecurity
from sluice_api.source import BOOTSTRAP_MAX, PUBSUB_NAME, PUBSUB_PROJECT, KafkaSource
from sluice_api.spec_base import Model


class KafkaDeadLetter(Model):
    topic: str = Field(
        pattern=r"^[a-zA-Z0-9._-]{1,249}$", max_length=249, description="Dead-letter topic."
    )
    bootstrap_servers: str | None = Field(
        default=None,
        max_length=BOOTSTRAP_MAX,
        description="Brokers of the dead-letter topic; default: the source's.",
    )
    security: KafkaSecurity | None = Field(
        default=None,
        description=(
            "How the driver connects to the dead-letter brokers; default: the source's "
            "security when bootstrapServers is unset (the same cluster), else PLAINTEXT. "
            "The source's credentials never go to other brokers."
        ),
    )

    def security_with(self, source: KafkaSource | None) -> KafkaSecurity:
        """The security in force: its own, else the source's when on the same brokers."""
        if self.security is not None:
            return self.security
        if self.bootstrap_servers is None and source is not None:
            return source.security
        return KafkaSecurity()


class PubSubDeadLetter(Model):
    topic: str = Field(pattern=PUBSUB_NAME, max_length=255, description="Dead-letter topic id.")
    project: str | None = Field(
        default=None,
        pattern=PUBSUB_PROJECT,
        max_length=100,
        description="Project of the topic; default: the Pub/Sub source's.",
    )


class DeadLetter(Model):
    """Exactly one destination of rejected records."""

    kafka: KafkaDeadLetter | None = Field(
        default=None, description="Rejected records go to this Kafka topic."
    )
    pubsub: PubSubDeadLetter | None = Field(
        default=None,
        description=(
            "Rejected records go to this Pub/Sub topic (with a Pub/Sub source only: it "
            "uses the source's endpoint and credentials)."
        ),
    )

    @model_validator(mode="after")
    def exactly_one(self) -> Self:
        if (self.kafka is None) == (self.pubsub is None):
            raise ValueError("set exactly one of deadLetter.kafka or deadLetter.pubsub")
        return self
