"""The dead-letter writer's promise: it returns only once Kafka confirmed every
reject, and otherwise fails the batch naming the topic (a fake producer with
failure switches stands in for Kafka; the real one is in the integration test)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sluice_job.deadletter import (
    REASON_MAX_CHARS,
    DeadLetterError,
    Header,
    KafkaDeadLetters,
    NoDeadLetters,
    Reject,
    RejectedWithoutDeadLetterError,
    fit,
    headers,
    payload_budget,
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


def test_a_record_larger_than_a_letter_is_cut_to_fit_and_the_letter_says_how_large_it_was() -> None:
    producer = FakeProducer()
    big = Reject(b"k" * 10, b"v" * 50_000, "ui-events", 0, 5, "malformed JSON")
    letters = KafkaDeadLetters(producer, "dlq", "a/p", "kafka:9092", max_message_bytes=20_000)
    letters.write([big, *REJECTS], batch_id=3, count=3)
    cut, small, empty = producer.sent
    assert len(cut["key"]) + len(cut["value"]) <= payload_budget(20_000)
    assert cut["key"] == b"k" * 10  # the key kept whole, the value cut from its end
    assert cut["value"] == b"v" * (payload_budget(20_000) - 10)
    assert dict(cut["headers"])[Header.TRUNCATED] == b"true"
    assert dict(cut["headers"])[Header.KEY_SIZE] == b"10"
    assert dict(cut["headers"])[Header.VALUE_SIZE] == b"50000"
    for whole in (small, empty):  # records that fit carry no truncation headers
        assert Header.TRUNCATED not in dict(whole["headers"])
    assert small["value"] == b"{not json"


def test_a_huge_key_is_cut_to_half_the_budget_when_the_value_needs_room() -> None:
    reject = Reject(b"k" * 1_000, b"v" * 1_000, "t", 0, 1, "bad")
    cut = fit(reject, 600)
    assert (cut.key, cut.value) == (b"k" * 300, b"v" * 300)
    assert cut.sizes() == (1_000, 1_000)
    assert cut.truncated
    assert fit(Reject(b"k" * 900, b"v" * 10, "t", 0, 1, "bad"), 600).key == b"k" * 590


def test_sizes_cut_before_the_driver_are_kept_in_the_letter() -> None:
    """Spark cuts large rejects before they reach the driver and passes the original
    sizes beside them: the letter reports those, not what arrived."""
    arrived = Reject(b"k", b"v" * 100, "t", 0, 1, "bad", key_size=1, value_size=2_000_000)
    assert arrived.truncated
    names = dict(headers(fit(arrived, 1_000), "a/p", 1))
    assert names[Header.VALUE_SIZE] == b"2000000"


def test_a_long_reason_is_cut_so_the_headers_stay_within_the_headroom() -> None:
    reject = Reject(None, b"x", "t", 0, 1, "r" * 100_000)
    reason = dict(headers(reject, "a/p", 1))[Header.REASON]
    assert len(reason) == REASON_MAX_CHARS


def test_the_producer_batches_no_more_than_the_topic_takes() -> None:
    assert producer_config({"bootstrap.servers": "k:9092"}, 20_000)["batch.size"] == 20_000
    assert "batch.size" not in producer_config({"bootstrap.servers": "k:9092"})
