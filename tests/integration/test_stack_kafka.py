"""The local Kafka broker works as a client of Sluice sees it: records go in and come
back with their key, value, partition and offset, and topics exist only when created."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.support import state

pytestmark = pytest.mark.integration

DEADLINE_SECONDS = 30.0


def test_record_round_trips_through_the_broker(
    kafka_bootstrap: str, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=3)
    produce_two(kafka_bootstrap, topic)
    received = state.consume({"bootstrap.servers": kafka_bootstrap}, topic, 2)
    assert [(m.topic(), m.partition(), m.offset(), m.key(), m.value()) for m in received] == [
        (topic, 2, 0, b"page-1", b"first"),
        (topic, 2, 1, b"page-1", b"second"),
    ]


def test_a_restarted_broker_keeps_its_records(
    kafka_bootstrap: str, kafka_topic: Callable[..., str]
) -> None:
    """`sluice-dev restart kafka` (the soak's broker fault) stops the broker, keeps it
    down, and starts it again with its log: records written before are read after."""
    topic = kafka_topic(partitions=3)
    produce_two(kafka_bootstrap, topic)
    cli = Path(sys.executable).parent / "sluice-dev"
    done = subprocess.run(
        [str(cli), "restart", "kafka", "--down", "2"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kafka back in" in done.stdout
    received = state.consume({"bootstrap.servers": kafka_bootstrap}, topic, 2)
    assert [(m.partition(), m.offset(), m.value()) for m in received] == [
        (2, 0, b"first"),
        (2, 1, b"second"),
    ]


def produce_two(kafka_bootstrap: str, topic: str) -> None:
    delivered: list[Message] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        assert err is None, f"delivery failed: {err}"
        delivered.append(msg)

    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for value in (b"first", b"second"):
        producer.produce(topic, key=b"page-1", value=value, partition=2, on_delivery=on_delivery)
    assert producer.flush(DEADLINE_SECONDS) == 0, "records still queued after the deadline"
    assert [(m.partition(), m.offset()) for m in delivered] == [(2, 0), (2, 1)]


def test_broker_does_not_create_topics_on_demand(
    kafka_bootstrap: str, kafka_topic: Callable[..., str]
) -> None:
    missing = kafka_topic(partitions=1) + "-never-created"
    # A producer's metadata request asks the broker to create unknown topics.
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    metadata = producer.list_topics(topic=missing, timeout=10)

    error = metadata.topics[missing].error
    assert error is not None
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert missing not in producer.list_topics(timeout=10).topics


def test_a_stopped_background_stream_leaves_exactly_its_first_events(
    kafka_bootstrap: str, kafka_topic: Callable[..., str]
) -> None:
    """The e2e tests produce until their faults are over: the events that exist are
    then exactly ``0 .. produced-1``, each once, which their sink checks rely on."""
    from sluice_dev.events import EventFactory
    from sluice_dev.produce import Background
    from tests.support.waiting import wait_for

    topic, factory = kafka_topic(partitions=2), EventFactory(seed=5)
    stream = Background(kafka_bootstrap, topic, 1_000_000, 2_000.0, factory).start()
    wait_for(lambda: stream.produced >= 500, timeout=60, what="500 events produced")
    stream.stop()
    produced = stream.wait(60)
    assert 500 <= produced < 1_000_000
    keys = sorted(record.key for record in state.read_topic(kafka_bootstrap, topic))
    assert keys == sorted(factory.record(seq)[0] for seq in range(produced))
