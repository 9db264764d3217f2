"""``trigger.mode: LowLatency`` with the real driver (issue 40 item 2): a small batch
runs in one Spark task, every guarantee of the default mode holds through a driver
SIGKILLed between its write and its commit, a driver frozen in a batch (a partitioned
node's) and fenced once its successor went on, and an upgrade; a transform whose
plan shuffles is refused before anything is written.

The guarantees are checked with the KPI example, whose rows are keyed by batch id:
a record lost is missing from its window's sum, a record counted twice (a batch
re-run under another id, a zombie's commit) is in it twice.
"""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import kpis, state
from tests.support.driver import Driver, drain_and_stop, kill_zombie_then_upgrade, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 4
CAP = 150
HALF = 1_500
LOW_LATENCY = {"mode": "LowLatency", "intervalSeconds": 0}


def test_a_small_batch_runs_in_one_task_and_every_record_is_written(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=PARTITIONS)
    factory = EventFactory(seed=61)
    produce(kafka_bootstrap, topic, HALF, factory=factory)
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        trigger=LOW_LATENCY,
        entrypoint="tests.support.transforms:tasks_tagged",
        cap=CAP,
    )
    run = driver.start(body, epoch=1)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(run, cassandra, events_table, driver.checkpoint_key, ends)

    rows = state.events(cassandra, events_table)
    assert set(rows) == {f"e-61-{seq}" for seq in range(HALF)}
    assert {row.tag for row in rows.values()} == {"v1:1"}, "each batch read in one task"
    assert len([b for b in run.batches() if b["records"]]) >= HALF // (PARTITIONS * CAP)


def test_low_latency_counts_every_record_once_through_a_kill_a_fenced_zombie_and_an_upgrade(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver: Driver,
) -> None:
    cassandra.execute(kpis.TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    topic, letters = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    factory = EventFactory(seed=67, bad_every=20)
    produce(kafka_bootstrap, topic, HALF, factory=factory)
    v1 = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        trigger=LOW_LATENCY,
        table="page_kpis",
        entrypoint="sluice_job.examples.kpi:transform",
        options={"windowSeconds": 60},
        cap=CAP,
        deadLetter={"kafka": {"topic": letters}},
    )

    def second_half() -> None:
        produce(kafka_bootstrap, topic, HALF, start=HALF, factory=factory)

    kill_zombie_then_upgrade(
        driver,
        v1,
        {"options": {"windowSeconds": 60, "version": 2}},
        cassandra,
        cassandra_keyspace,
        (kafka_bootstrap, topic, PARTITIONS),
        second_half,
    )

    assert kpis.sums(cassandra, cassandra_keyspace) == kpis.expected_sums(
        factory, range(2 * HALF)
    ), "every valid event counted once: none lost, none twice"


def test_a_transform_whose_plan_shuffles_is_refused_before_anything_is_written(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=2)
    produce(kafka_bootstrap, topic, 200, factory=EventFactory(seed=71))
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        trigger=LOW_LATENCY,
        entrypoint="tests.support.transforms:repartitioned",
    )
    run = driver.start(body, epoch=1)
    code = run.wait(300)

    message = run.message()
    assert (code, message["reason"]) == (2, "InvalidConfig"), message
    assert "trigger.mode LowLatency" in message["message"]
    assert "Exchange RoundRobinPartitioning(4)" in message["message"]
    assert state.events(cassandra, events_table) == {}
    assert state.committed(cassandra, events_table, driver.checkpoint_key) == {}
