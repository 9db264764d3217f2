"""The dead-letter writer's promise: it returns only once Kafka confirmed every
reject, and otherwise fails the batch naming the topic (a fake producer with
failure switches stands in for Kafka; the real one is in the integration test)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sluice_job.deadletter import (
    DeadLetterError,
    Header,
    KafkaDeadLetters,
    NoDeadLetters,
    Reject,
    RejectedWithoutDeadLetterError,
    producer_config,
)

pytestmark = pytest.mark.unit

REJECTS = [
    Reject(b"k-19", b"{not json", "ui-events", 3, 19, "malformed JSON"),
    Reject(None, None, "ui-events", 1, 7, "no value"),
]


@dataclass
class FakeProducer:
    """Queues sends and confirms them on flush, unless told to fail."""

    fail_delivery: str | None = None
    undelivered_on_flush: int = 0
    buffer_full_times: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)
    pending: list[Callable[[object, object], None]] = field(default_factory=list)
    polls: int = 0

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        if self.buffer_full_times:
            self.buffer_full_times -= 1
            raise BufferError("queue full")
        self.sent.append({"topic": topic, "value": value, "key": key, **kwargs})
        self.pending.append(kwargs["on_delivery"])

    def poll(self, timeout: float = 0) -> int:
        self.polls += 1
        return 0

    def flush(self, timeout: float = 0) -> int:
        for callback in self.pending[self.undelivered_on_flush :]:
            callback(self.fail_delivery, None)
        remaining = min(self.undelivered_on_flush, len(self.pending))
        self.pending.clear()
        return remaining


def writer(producer: FakeProducer) -> KafkaDeadLetters:
    return KafkaDeadLetters(producer, "ui-events-dlq", "analytics/page-kpis", "kafka:9092")


def test_each_reject_keeps_its_key_and_value_and_says_where_it_came_from_and_why() -> None:
    producer = FakeProducer()
    writer(producer).write(REJECTS, batch_id=42, count=2)
    first, second = producer.sent
    assert (first["topic"], first["key"], first["value"]) == (
        "ui-events-dlq",
        b"k-19",
        b"{not json",
    )
    assert dict(first["headers"]) == {
        Header.SOURCE_TOPIC: b"ui-events",
        Header.SOURCE_PARTITION: b"3",
        Header.SOURCE_OFFSET: b"19",
        Header.REASON: b"malformed JSON",
        Header.PIPELINE: b"analytics/page-kpis",
        Header.BATCH_ID: b"42",
    }
    assert (second["key"], second["value"]) == (None, None)


def test_a_failed_delivery_fails_the_batch_naming_the_topic() -> None:
    producer = FakeProducer(fail_delivery="Broker: Not enough in-sync replicas")
    with pytest.raises(DeadLetterError, match=r"'ui-events-dlq' at kafka:9092.*batch 42") as err:
        writer(producer).write(REJECTS, batch_id=42, count=2)
    assert "not enough in-sync replicas" in str(err.value).lower()
    assert "not committed" in str(err.value)


def test_a_reject_still_unconfirmed_after_the_flush_fails_the_batch() -> None:
    producer = FakeProducer(undelivered_on_flush=1)
    with pytest.raises(DeadLetterError, match="1 of 2 rejects"):
        writer(producer).write(REJECTS, batch_id=42, count=2)


def test_a_full_local_queue_is_drained_and_nothing_is_dropped() -> None:
    producer = FakeProducer(buffer_full_times=3)
    writer(producer).write(REJECTS, batch_id=1, count=2)
    assert len(producer.sent) == 2
    assert producer.polls >= 3


def test_without_a_dead_letter_topic_rejects_stop_the_pipeline_naming_the_first() -> None:
    with pytest.raises(RejectedWithoutDeadLetterError) as err:
        NoDeadLetters().write(iter(REJECTS), batch_id=9, count=2)
    message = str(err.value)
    assert "batch 9" in message
    assert "ui-events/3@19: malformed JSON" in message
    assert "spec.deadLetter.kafka.topic" in message


def test_producer_is_idempotent_and_waits_for_all_in_sync_replicas() -> None:
    config = producer_config({"bootstrap.servers": "kafka:9092", "sasl.username": "u"})
    assert config["enable.idempotence"] is True
    assert config["acks"] == "all"
    assert config["bootstrap.servers"] == "kafka:9092"
    assert config["sasl.username"] == "u"
