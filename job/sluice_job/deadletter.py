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

A letter must fit the topic: a record larger than the dead-letter topic's
``max.message.bytes`` (read from the broker at start) would fail every attempt and
wedge the pipeline. Such a record's key and value are cut to fit (:func:`fit`; Spark
cuts them before they reach the driver, ``execute``), and the letter says so:
``sluice.truncated`` with the original ``sluice.key.size`` and ``sluice.value.size``.

Without ``spec.deadLetter`` nothing may be dropped silently: a batch with rejects
fails (:class:`RejectedWithoutDeadLetterError`) naming the first one, and the
pipeline resumes from that batch once a dead-letter topic is configured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from confluent_kafka import KafkaException
from confluent_kafka import Producer as KafkaProducer

# ConfigResource is missing from the package's stubs, not from the package.
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from sluice_job import logs

CONFIRM_SECONDS: Final = 30.0
"""How long Kafka has to acknowledge a batch's rejects before the batch fails."""
MAX_MESSAGE_BYTES: Final = 1_000_000
"""librdkafka's ``message.max.bytes`` default (a topic's default is 1,048,588)."""
LETTER_HEADROOM: Final = 2048
"""Bytes of a letter that are not the record's key and value: the headers (the
reason cut at :data:`REASON_MAX_CHARS`) and the record and batch framing."""
REASON_MAX_CHARS: Final = 1000


class Header(StrEnum):
    SOURCE_TOPIC = "sluice.source.topic"
    SOURCE_PARTITION = "sluice.source.partition"
    SOURCE_OFFSET = "sluice.source.offset"
    REASON = "sluice.reason"
    PIPELINE = "sluice.pipeline"
    BATCH_ID = "sluice.batch.id"
    TRUNCATED = "sluice.truncated"
    KEY_SIZE = "sluice.key.size"
    VALUE_SIZE = "sluice.value.size"


@dataclass(frozen=True)
class Reject:
    """A record the transform refused, as read from Kafka, and why."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    reason: str
    key_size: int | None = None
    """The record's key in bytes, when the key here may be cut (else its length)."""
    value_size: int | None = None
    """The record's value in bytes, when the value here may be cut (else its length)."""
    extra: tuple[tuple[str, str], ...] = ()
    """More headers of the letter about its source record (a Pub/Sub message's id
    and attributes, ``pubsub.records``)."""

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}: {self.reason}"

    def sizes(self) -> tuple[int, int]:
        """The record's key and value sizes in bytes, before any cut."""
        return (
            _size(self.key) if self.key_size is None else self.key_size,
            _size(self.value) if self.value_size is None else self.value_size,
        )

    @property
    def truncated(self) -> bool:
        return self.sizes() != (_size(self.key), _size(self.value))


def _size(data: bytes | None) -> int:
    return 0 if data is None else len(data)


def fit(reject: Reject, budget: int) -> Reject:
    """``reject`` with key and value cut to at most ``budget`` bytes together (a pure
    function): the value is cut first; a key longer than half the budget is cut to
    half, if the value needs the room. The original sizes stay in the result."""
    key_size, value_size = reject.sizes()
    key, value = reject.key or b"", reject.value or b""
    sized = dataclasses.replace(reject, key_size=key_size, value_size=value_size)
    if len(key) + len(value) <= budget:
        return sized
    keep_key = min(len(key), max(budget - len(value), budget // 2))
    keep_value = max(0, budget - keep_key)
    return dataclasses.replace(
        sized,
        key=None if reject.key is None else key[:keep_key],
        value=None if reject.value is None else value[:keep_value],
    )


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

    @property
    def payload_budget(self) -> int:
        """Most bytes of a record's key and value together that one letter carries."""

    def write(self, rejects: Iterable[Reject], *, batch_id: int, count: int) -> None:
        """Make ``count`` rejects durable, or raise; returns only when they are."""


def headers(reject: Reject, pipeline: str, batch_id: int) -> list[tuple[str, str | bytes | None]]:
    """The headers of a dead letter (a pure function)."""
    values = {
        Header.SOURCE_TOPIC: reject.topic,
        Header.SOURCE_PARTITION: str(reject.partition),
        Header.SOURCE_OFFSET: str(reject.offset),
        Header.REASON: reject.reason[:REASON_MAX_CHARS],
        Header.PIPELINE: pipeline,
        Header.BATCH_ID: str(batch_id),
    }
    if reject.truncated:
        key_size, value_size = reject.sizes()
        values[Header.TRUNCATED] = "true"
        values[Header.KEY_SIZE] = str(key_size)
        values[Header.VALUE_SIZE] = str(value_size)
    named = [(str(name), value) for name, value in values.items()]
    return [(name, value.encode()) for name, value in (*named, *reject.extra)]


def producer_config(
    client: Mapping[str, str], max_message_bytes: int | None = None
) -> dict[str, Any]:
    """librdkafka settings of the dead-letter producer: ``client`` (brokers,
    credentials) plus idempotence with ``acks=all``, so a retried send neither
    duplicates nor reorders, and an acknowledged letter survives a broker loss.
    Keys are partitioned like Java clients do (murmur2). ``max_message_bytes`` (the
    topic's limit) bounds the record batches the producer builds, which the broker
    checks as a whole."""
    config: dict[str, Any] = {
        **client,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
        "partitioner": "murmur2_random",
        "message.timeout.ms": int(CONFIRM_SECONDS * 1000),
    }
    if max_message_bytes is not None:
        config["batch.size"] = max_message_bytes
    return config


def payload_budget(max_message_bytes: int) -> int:
    """Bytes of key and value a letter may carry under the topic's limit."""
    return max(0, max_message_bytes - LETTER_HEADROOM)


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
    max_message_bytes: int = MAX_MESSAGE_BYTES
    """The smaller of the topic's ``max.message.bytes`` and the producer's."""
    refuses: bool = False

    @property
    def payload_budget(self) -> int:
        return payload_budget(self.max_message_bytes)

    def write(self, rejects: Iterable[Reject], *, batch_id: int, count: int) -> None:
        failures: list[str] = []

        def delivered(err: object, _message: object) -> None:
            if err is not None:
                failures.append(str(err))

        sent = 0
        for reject in rejects:
            self._produce(fit(reject, self.payload_budget), batch_id, delivered)
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
    payload_budget: int = payload_budget(MAX_MESSAGE_BYTES)

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
    most production brokers do not create topics on first use) and reading the
    largest message it takes."""
    servers = client.get("bootstrap.servers", "?")
    admin = AdminClient(dict(client))
    try:
        found = admin.list_topics(topic=topic, timeout=timeout).topics.get(topic)
    except KafkaException as err:
        raise DeadLetterUnavailableError(f"dead-letter Kafka at {servers}: {err}") from None
    if found is None or found.error is not None:
        raise DeadLetterError(
            f"dead-letter topic {topic!r} at {servers}: {found.error if found else 'missing'}; "
            "create it (spec.deadLetter.kafka.topic)"
        )
    limit = min(
        int(client.get("message.max.bytes", MAX_MESSAGE_BYTES)),
        _topic_limit(admin, topic, timeout) or MAX_MESSAGE_BYTES,
    )
    producer = KafkaProducer(producer_config(client, limit))
    return KafkaDeadLetters(producer, topic, pipeline, servers, max_message_bytes=limit)


def _topic_limit(admin: AdminClient, topic: str, timeout: float) -> int | None:
    """The topic's ``max.message.bytes``; ``None`` when the broker will not say (the
    principal may lack DescribeConfigs): then the producer's limit is used."""
    resource = ConfigResource("topic", topic)
    try:
        configs = admin.describe_configs([resource], request_timeout=timeout)[resource].result(
            timeout
        )
        return int(configs["max.message.bytes"].value)
    except (KafkaException, KeyError, ValueError) as err:
        logs.event(
            "dead-letter topic limit unknown: letters are cut to the producer's message.max.bytes",
            level=30,
            topic=topic,
            message=str(err),
        )
        return None
