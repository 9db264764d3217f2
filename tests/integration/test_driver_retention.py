"""Retention deleting the start of a planned, uncommitted batch: the batch keeps its id
and its end offsets, starts at the oldest retained record, and the loss is recorded.

Reproduction (before the fix): the recovering driver discarded the planned batch and
planned its id again from the oldest retained offset with a full cap, so the same
batch id covered other end offsets than the ones written ahead (a unit test in
test_runner.py shows batch 1 planned as [0, 10) committed as [4, 14)); an output keyed
by batch id counted the records past the old end twice.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec

pytestmark = pytest.mark.integration

RECORDS = 1_000
CAP = 200
DELETED = 50  # records retention removes from the start of the planned batch


def test_a_planned_batch_keeps_its_ends_when_retention_deletes_its_start(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=61))
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="sluice_job.examples.events:transform",
        cap=CAP,
    )
    body["source"]["kafka"]["onOffsetOutOfRange"] = "earliest"
    pipeline_id = driver.checkpoint_key
    run = driver.start(body, epoch=1, failpoints="read=5")
    run.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "read" and e["batch_id"] == 2,
        timeout=240,
        what="batch 2 planned and being read",
    )
    run.signal_tree(signal.SIGKILL)
    run.wait(60)
    row = state.checkpoint_row(cassandra, events_table, pipeline_id)
    assert (row.batch_id, row.planned_id) == (1, 2)
    planned = json.loads(row.planned)["ranges"][topic]["0"]
    assert planned == [CAP, 2 * CAP]

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    cut = planned[0] + DELETED
    [done] = admin.delete_records([KafkaTopicPartition(topic, 0, cut)]).values()
    assert done.result(30).low_watermark == cut  # as retention leaves it

    again = driver.start(body, epoch=2)
    ends = state.end_offsets(kafka_bootstrap, topic, 1)
    drain_and_stop(again, cassandra, events_table, pipeline_id, ends, timeout=300)

    history = {b.batch_id: b for b in state.history(cassandra, events_table, pipeline_id)}
    recovered = history[2]
    assert json.loads(recovered.ranges)[topic]["0"] == [cut, planned[1]], "same id, same end"
    assert json.loads(recovered.lost)[topic]["0"] == [planned[0], cut]
    assert json.loads(history[3].ranges)[topic]["0"][0] == planned[1]
    seqs = {int(r.seq) for r in state.events(cassandra, events_table).values()}
    assert seqs == set(range(RECORDS)) - set(range(planned[0], cut))
    skipped = [
        e for e in again.events() if e.get("event") == "skipped records deleted by retention"
    ]
    assert [(e["committed"], e["resumed_at"], e["batch_id"]) for e in skipped] == [
        (planned[0], cut, 2)
    ]
