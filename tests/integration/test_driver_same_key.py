"""Two records of one batch that write the same key: the later one wins whole, in
Cassandra and in Datastore.

Reproduction (before the fix): every write of a batch carried the same write version,
so for two rows with one key Cassandra kept the greater value of each cell: 20 of 20
rows ended up mixed, the page of the first record beside the action of the second.
The Datastore test passed before too (both rows were in one Spark partition and the
sink keeps the last row of a key within a commit; across partitions it was a race);
it guards that ranking by position keeps it so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support import datastore, state
from tests.support.driver import Driver, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

KEYS = 20
TS = 1_763_780_400_000


def event(key: int, page: str, action: str) -> bytes:
    fields = {"event_id": f"dup-{key}", "seq": key, "page": page, "action": action, "ts": TS}
    return json.dumps({**fields, "user_id": "u-1"}).encode()


def produce_pairs(bootstrap: str, topic: str) -> None:
    """Per key, a first record whose page sorts last and action first, then a second
    record the other way round: a cell-by-cell merge shows as a mixed row."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key in range(KEYS):
        producer.produce(topic, event(key, "/zzz-first", "aaa-first"), partition=0)
    for key in range(KEYS):
        producer.produce(topic, event(key, "/aaa-second", "zzz-second"), partition=0)
    assert producer.flush(30) == 0


def test_the_later_record_of_a_key_wins_whole_in_cassandra(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce_pairs(kafka_bootstrap, topic)
    body = spec(
        bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
    )
    run = driver.start(body, epoch=1)
    drain_and_stop(run, cassandra, events_table, driver.checkpoint_key, {0: 2 * KEYS})

    assert [b["records"] for b in run.batches() if b["records"]] == [2 * KEYS], "one batch"
    rows = state.events(cassandra, events_table)
    assert {(r.page, r.action, r.source_offset) for r in rows.values()} == {
        ("/aaa-second", "zzz-second", KEYS + key) for key in range(KEYS)
    }


def test_the_later_record_of_a_key_wins_whole_in_datastore(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    datastore_host: str,
    datastore_project: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce_pairs(kafka_bootstrap, topic)
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        entrypoint="tests.support.datastore:keyed",
        sink={"datastore": {"project": datastore_project, "kind": datastore.KIND}},
    )
    run = driver.start(body, epoch=1, env={"DATASTORE_EMULATOR_HOST": datastore_host})
    drain_and_stop(run, cassandra, cassandra_keyspace, driver.checkpoint_key, {0: 2 * KEYS})

    stored = datastore.entities(datastore_project, datastore_host)
    assert {(e["page"], e["action"], e["source_offset"]) for e in stored.values()} == {
        ("/aaa-second", "zzz-second", KEYS + key) for key in range(KEYS)
    }
