"""Records of aborted Kafka transactions never reach the sink or the dead-letter topic,
and an open transaction holds the pipeline at the last stable offset.

Reproduction (before the fix): the planner planned up to the high watermark and Spark
read uncommitted data. In this test the aborted transaction's 45 valid events were all
in the sink and its 5 malformed ones all in the dead-letter topic, and with a
transaction left open the driver committed offsets past the last stable offset (up to
the high watermark, inside the open transaction).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from sluice_dev.events import EventFactory
from tests.support import state
from tests.support.driver import Driver, spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2
FACTORY = EventFactory(seed=45, bad_every=10)
COMMITTED_FIRST, ABORTED, COMMITTED_SECOND, OPEN = (
    range(0, 50),
    range(50, 100),
    range(100, 150),
    range(150, 170),
)


def transactional(bootstrap: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(30)
    return producer


def send(producer: Producer, topic: str, seqs: Iterable[int]) -> None:
    producer.begin_transaction()
    for seq in seqs:
        key, value = FACTORY.record(seq)
        producer.produce(topic, key=key, value=value)
    producer.flush(30)


def latest(bootstrap: str, topic: str, isolation: IsolationLevel) -> dict[int, int]:
    """The last stable offsets (READ_COMMITTED) or the high watermarks."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {KafkaTopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}  # type: ignore[no-untyped-call]
    futures = admin.list_offsets(request, isolation_level=isolation)
    return {tp.partition: int(f.result(30).offset) for tp, f in futures.items()}


def seqs_in_sink(cassandra: Any, keyspace: str) -> set[int]:
    return {int(row.seq) for row in state.events(cassandra, keyspace).values()}


def test_aborted_records_are_never_read_and_an_open_transaction_holds_the_batch(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic, dead_letter_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    producer = transactional(kafka_bootstrap)
    send(producer, topic, COMMITTED_FIRST)
    producer.commit_transaction(30)
    send(producer, topic, ABORTED)
    producer.abort_transaction(30)
    send(producer, topic, COMMITTED_SECOND)
    producer.commit_transaction(30)
    send(producer, topic, OPEN)  # left open while the driver runs
    stable = latest(kafka_bootstrap, topic, IsolationLevel.READ_COMMITTED)
    high = latest(kafka_bootstrap, topic, IsolationLevel.READ_UNCOMMITTED)
    assert sum(high.values()) > sum(stable.values()), "the open transaction is past the LSO"

    pipeline_id = driver.checkpoint_key
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap,
            topic=topic,
            contact=cassandra_contact,
            keyspace=events_table,
            entrypoint="sluice_job.examples.events:transform",
            deadLetter={"kafka": {"topic": dead_letter_topic}},
        ),
        epoch=1,
    )
    wait_for(
        lambda: state.committed(cassandra, events_table, pipeline_id) == stable,
        timeout=240,
        what="the driver to commit up to the last stable offsets",
    )
    valid = {s for s in [*COMMITTED_FIRST, *COMMITTED_SECOND] if not FACTORY.is_bad(s)}
    assert seqs_in_sink(cassandra, events_table) == valid
    batches_at_lso = len(run.batches())

    producer.commit_transaction(30)
    ends = latest(kafka_bootstrap, topic, IsolationLevel.READ_COMMITTED)
    assert ends == latest(kafka_bootstrap, topic, IsolationLevel.READ_UNCOMMITTED)
    wait_for(
        lambda: state.committed(cassandra, events_table, pipeline_id) == ends,
        timeout=240,
        what="the driver to read the transaction once it commits",
    )
    with_open = valid | {s for s in OPEN if not FACTORY.is_bad(s)}
    assert seqs_in_sink(cassandra, events_table) == with_open
    assert len(run.batches()) > batches_at_lso

    letters = state.read_topic(kafka_bootstrap, dead_letter_topic)
    dead = {
        (int(m.headers["sluice.source.partition"]), int(m.headers["sluice.source.offset"]))
        for m in letters
    }
    assert len(letters) == len(dead)
    bad_committed = [s for s in [*COMMITTED_FIRST, *COMMITTED_SECOND, *OPEN] if FACTORY.is_bad(s)]
    assert len(letters) == len(bad_committed), "no aborted malformed record is a dead letter"
