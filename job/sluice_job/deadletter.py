"""Dead letters: records the transform rejects, kept in a Kafka topic with the reason.

Each reject is produced with its original key and value, and headers saying where
it came from and why it was refused (:class:`Header`). The writer is the driver
process itself: rejects are few (a few percent of a batch at worst in a healthy
pipeline), and one long-lived producer in one place is simpler to confirm than one
per Spark task. Spark brings the rejects to the driver (see ``execute``).

Durability before progress: :meth:`KafkaDeadLetters.write` returns only once Kafka
acknowledged every reject (idempotent producer, ``acks=all``); otherwise it raises
and the batch fails uncommitted. So a commit never covers a reject that is not yet
durable. Delivery is at-least-once: a batch re-run after a crash between this write
and the commit writes its rejects again; the headers ``sluice.source.topic``,
``.partition`` and ``.offset`` identify a record, so readers can drop repeats.

Without ``spec.deadLetter`` nothing may be dropped silently: a batch with rejects
fails (:class:`RejectedWithoutDeadLetterError`) naming the first one, and the
pipeline resumes from that batch once a dead-letter topic is configured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from confluent_kafka import KafkaException
from confluent_kafka import Producer as KafkaProducer

CONFIRM_SECONDS: Final = 30.0
"""How long Kafka has to acknowledge a batch's rejects before the batch fails."""


class Header(StrEnum):
    SOURCE_TOPIC = "sluice.source.topic"
    SOURCE_PARTITION = "sluice.source.partition"
    SOURCE_OFFSET = "sluice.source.offset"
    REASON = "sluice.reason"
    PIPELINE = "sluice.pipeline"
    BATCH_ID = "sluice.batch.id"


@dataclass(frozen=True)
class Reject:
    """A record the transform refused, as read from Kafka, and why."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}: {self.reason}"


class DeadLetterError(Exception):
    """The dead-letter topic is missing or refused a reject (exit 1)."""


class DeadLetterUnavailableError(DeadLetterError):
    """The dead-letter brokers did not answer or confirm in time: an outage, waited out
    by the driver like any dependency outage (``outages``)."""


class RejectedWithoutDeadLetterError(Exception):
    """The transform rejected records and ``spec.deadLetter`` is not set (exit 1)."""


class DeadLetters(Protocol):
    @property
    def refuses(self) -> bool:
        """True when any reject fails the batch: then there is no point writing the
        sink before the rejects are known."""

    def write(self, rejects: Iterable[Reject], *, batch_id: int, count: int) -> None:
        """Make ``count`` rejects durable, or raise; returns only when they are."""


def headers(reject: Reject, pipeline: str, batch_id: int) -> list[tuple[str, str | bytes | None]]:
    """The headers of a dead letter (a pure function)."""
    values = {
        Header.SOURCE_TOPIC: reject.topic,
        Header.SOURCE_PARTITION: str(reject.partition),
        Header.SOURCE_OFFSET: str(reject.offset),
        Header.REASON: reject.reason,
        Header.PIPELINE: pipeline,
        Header.BATCH_ID: str(batch_id),
    }
    return [(str(name), value.encode()) for name, value in values.items()]


def producer_config(client: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings of the dead-letter producer: ``client`` (brokers,
    credentials) plus idempotence with ``acks=all``, so a retried send neither
    duplicates nor reorders, and an acknowledged letter survives a broker loss.
    Keys are partitioned like Java clients do (murmur2)."""
    return {
        **client,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
        "partitioner": "murmur2_random",
        "message.timeout.ms": int(CONFIRM_SECONDS * 1000),
    }


class Producer(Protocol):
    """The part of ``confluent_kafka.Producer`` the writer uses."""

    def produce(
        self,
        topic: str,
        value: bytes | None = ...,
        key: bytes | None = ...,
        *,
        headers: list[tuple[str, str | bytes | None]] = ...,
        on_delivery: Callable[[object, object], None] = ...,
    ) -> None: ...
    def poll(self, timeout: float = ...) -> int: ...
    def flush(self, timeout: float = ...) -> int: ...


@dataclass
class KafkaDeadLetters:
    producer: Producer
    topic: str
    pipeline: str
    servers: str
    refuses: bool = False

    def write(self, rejects: Iterable[Reject], *, batch_id: int, count: int) -> None:
        failures: list[str] = []

        def delivered(err: object, _message: object) -> None:
            if err is not None:
                failures.append(str(err))

        sent = 0
        for reject in rejects:
            self._produce(reject, batch_id, delivered)
            sent += 1
        remaining = self.producer.flush(CONFIRM_SECONDS + 5)
        if failures or remaining:
            permanent = any("too large" in f.lower() or "SIZE_TOO_LARGE" in f for f in failures)
            error = DeadLetterError if permanent else DeadLetterUnavailableError
            raise error(
                f"dead-letter topic {self.topic!r} at {self.servers}: "
                f"{len(failures) + remaining} of {sent} rejects of batch {batch_id} "
                f"not confirmed ({(failures or ['timed out'])[0]}); the batch is not committed"
            )

    def _produce(
        self, reject: Reject, batch_id: int, delivered: Callable[[object, object], None]
    ) -> None:
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    value=reject.value,
                    key=reject.key,
                    headers=headers(reject, self.pipeline, batch_id),
                    on_delivery=delivered,
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.1)
        self.producer.poll(0)


@dataclass(frozen=True)
class NoDeadLetters:
    """``spec.deadLetter`` unset: rejects stop the pipeline instead of vanishing."""

    refuses: bool = True

    def write(self, rejects: Iterable[Reject], *, batch_id: int, count: int) -> None:
        first = next(iter(rejects), None)
        raise RejectedWithoutDeadLetterError(
            f"batch {batch_id}: the transform rejected {count} record(s), first {first}; "
            "spec.deadLetter is not set, so they would be lost: set "
            "spec.deadLetter.kafka.topic, and the pipeline resumes with this batch"
        )


def kafka(
    client: Mapping[str, str], topic: str, pipeline: str, timeout: float = 10.0
) -> KafkaDeadLetters:
    """A writer to ``topic``, after checking that the topic exists (the stack's and
    most production brokers do not create topics on first use)."""
    servers = client.get("bootstrap.servers", "?")
    producer = KafkaProducer(producer_config(client))
    try:
        found = producer.list_topics(topic=topic, timeout=timeout).topics.get(topic)
    except KafkaException as err:
        raise DeadLetterUnavailableError(f"dead-letter Kafka at {servers}: {err}") from None
    if found is None or found.error is not None:
        raise DeadLetterError(
            f"dead-letter topic {topic!r} at {servers}: {found.error if found else 'missing'}; "
            "create it (spec.deadLetter.kafka.topic)"
        )
    return KafkaDeadLetters(producer, topic, pipeline, servers)
