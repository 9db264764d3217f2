"""Partitions added to a topic are read from their first record, whether they appear
while the driver runs or while it is stopped; ``startingOffsets`` places only a
pipeline that has no checkpoint.

Reproduction (before the fix): under ``startingOffsets: latest`` a partition added to
the topic while the pipeline ran started at its high watermark at the next plan, so
the records produced into it right after its creation were never read: 0 of 300 in
the sink, with no log line and no metric.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]

from sluice_dev.events import EventFactory
from tests.support import state
from tests.support.driver import Driver, spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

FACTORY = EventFactory(seed=77)


def add_partition_and_produce(bootstrap: str, topic: str, total: int, seqs: range) -> None:
    """Grow ``topic`` to ``total`` partitions and write ``seqs`` into the new one at once."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    wait_for(
        lambda: len(producer.list_topics(topic, timeout=5).topics[topic].partitions) == total,
        timeout=30,
        what=f"{topic} to have {total} partitions",
    )
    for seq in seqs:
        key, value = FACTORY.record(seq)
        producer.produce(topic, key=key, value=value, partition=total - 1)
    assert producer.flush(30) == 0


def test_partitions_added_while_running_and_while_stopped_are_read_from_their_start(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="sluice_job.examples.events:transform",
    )
    body["source"]["kafka"]["startingOffsets"] = "latest"
    pipeline_id = driver.checkpoint_key
    run = driver.start(body, epoch=1)
    wait_for(
        lambda: state.committed(cassandra, events_table, pipeline_id) == {0: 0},
        timeout=240,
        what="the pipeline's first checkpoint (at latest)",
    )

    add_partition_and_produce(kafka_bootstrap, topic, 2, range(0, 300))
    wait_for(
        lambda: state.committed(cassandra, events_table, pipeline_id) == {0: 0, 1: 300},
        timeout=120,
        what="the partition added while running to be read",
    )
    assert len(state.events(cassandra, events_table)) == 300
    assert (
        run.wait_event(
            lambda e: e.get("event", "").startswith("new partition"), timeout=5, what="a log line"
        )["partition"]
        == f"{topic}/1"
    )

    run.kill(signal.SIGTERM)
    assert run.wait(120) == 0
    add_partition_and_produce(kafka_bootstrap, topic, 3, range(300, 500))
    driver.start(body, epoch=2)
    wait_for(
        lambda: state.committed(cassandra, events_table, pipeline_id) == {0: 0, 1: 300, 2: 200},
        timeout=240,
        what="the partition added while stopped to be read",
    )
    rows = state.events(cassandra, events_table)
    assert {int(row.seq) for row in rows.values()} == set(range(500))
