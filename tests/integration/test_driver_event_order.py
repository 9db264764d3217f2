"""Latest state by event time (``spec.sink.orderColumn``): an older event that
arrives late never overwrites a newer one, through a kill, a replay and an upgrade.

Reproduction (issue 39, item 1): an ``order_state`` table (one row per order, its
latest status) ended with 63 of 29,912 rows holding an older status: the older event
arrived later, in a later batch, and every write carried its batch's version, so the
later batch won. There was no way to order the writes by the events' own time.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice_dev.produce import idempotent_producer, send
from sluice_job.write_order import EPOCH_SLOTS
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec
from tests.support.transforms import ORDER_STATE_TABLE
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ORDERS = 30
BASE_MS = 1_700_000_000_000
STEPS = {"created": 1, "paid": 2, "shipped": 3, "delivered": 4}
"""Each status's event time after its order's base (milliseconds): the later status
is the newer event."""


def event_ms(order: int, status: str) -> int:
    return BASE_MS + 1000 * order + STEPS[status]


def produce(bootstrap: str, topic: str, events: list[tuple[int, str]]) -> None:
    producer, deliveries = idempotent_producer(bootstrap)
    for order, status in events:
        value = {"order": f"o{order:02d}", "status": status, "ms": event_ms(order, status)}
        send(
            producer,
            topic,
            f"o{order:02d}".encode(),
            json.dumps(value).encode(),
            deliveries.callback,
        )
    deliveries.confirm(producer)


def latest(order: int) -> str:
    """The newest status each order gets in this test."""
    return "delivered" if order % 5 == 0 else "shipped"


def rows(session: Any, keyspace: str) -> dict[str, Any]:
    query = (
        f"SELECT order_id, status, event_time, tag, WRITETIME(status) AS w "
        f"FROM {keyspace}.order_state"
    )
    return {row.order_id: row for row in session.execute(query)}


def test_the_newest_event_of_each_key_wins_whatever_the_batch_order(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver: Driver,
) -> None:
    cassandra.execute(ORDER_STATE_TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    topic = kafka_topic(partitions=1)
    # First the newest known events (each order shipped; some twice; a third of them
    # paid after shipping, in the same or a later batch): 55 records, 6 batches of 10.
    produce(
        kafka_bootstrap,
        topic,
        [(o, "shipped") for o in range(ORDERS)]
        + [(o, "shipped") for o in range(0, ORDERS, 2)]
        + [(o, "paid") for o in range(0, ORDERS, 3)],
    )
    first_ends = state.end_offsets(kafka_bootstrap, topic, 1)
    pipeline = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        table="order_state",
        entrypoint="tests.support.transforms:order_state",
        cap=10,
        sink={
            "cassandra": {
                "contactPoints": [cassandra_contact],
                "keyspace": cassandra_keyspace,
                "table": "order_state",
            },
            "orderColumn": "event_time",
        },
    )
    pipeline_id = driver.checkpoint_key
    run = driver.start(pipeline, epoch=1)
    wait_for(
        lambda: state.committed(cassandra, cassandra_keyspace, pipeline_id) == first_ends,
        timeout=300,
        what="the first driver to commit the newest events",
    )
    # Then the late ones, older than what is stored (created, paid), and for every
    # fifth order a newer one (delivered); the driver is killed after its first batch
    # of them and its successor finishes.
    produce(
        kafka_bootstrap,
        topic,
        [(o, s) for o in range(ORDERS) for s in ("created", "paid")]
        + [(o, "delivered") for o in range(0, ORDERS, 5)],
    )
    ends = state.end_offsets(kafka_bootstrap, topic, 1)
    wait_for(
        lambda: state.committed(cassandra, cassandra_keyspace, pipeline_id)[0] > first_ends[0],
        timeout=300,
        what="a batch of the late events to commit",
    )
    run.kill()
    assert run.wait(60) != 0
    drain_and_stop(
        driver.start(pipeline, epoch=2), cassandra, cassandra_keyspace, pipeline_id, ends
    )

    stored = rows(cassandra, cassandra_keyspace)
    assert sorted(stored) == [f"o{o:02d}" for o in range(ORDERS)]
    older = {o: r.status for o, r in stored.items() if r.status != latest(int(o[1:]))}
    assert not older, f"rows holding an older status than their newest event: {older}"
    for order_id, row in stored.items():
        ms = event_ms(int(order_id[1:]), row.status)
        assert row.w // EPOCH_SLOTS == ms, f"{order_id}: write time {row.w} is not its event's"
        assert row.w % EPOCH_SLOTS in (1, 2), f"{order_id}: written by no driver of this test"

    # A replay by an upgraded driver (checkpoint reset, a new tag, epoch 3): the same
    # events in the same batches; the newest of each order wins again, and at equal
    # event times the newer driver's write replaces the older one's.
    for table in ("checkpoints", "batches", "claims"):
        cassandra.execute(
            f"DELETE FROM {cassandra_keyspace}.{table} WHERE pipeline = %s", (pipeline_id,)
        )
    upgraded = {**pipeline, "transform": {**pipeline["transform"], "options": {"tag": "v2"}}}
    drain_and_stop(
        driver.start(upgraded, epoch=3), cassandra, cassandra_keyspace, pipeline_id, ends
    )
    replayed = rows(cassandra, cassandra_keyspace)
    assert {o: r.status for o, r in replayed.items()} == {o: r.status for o, r in stored.items()}
    assert {r.tag for r in replayed.values()} == {"v2"}, "the upgrade's replay replaces the rows"
    assert all(r.w % EPOCH_SLOTS == 3 for r in replayed.values())
    assert all(r.w // EPOCH_SLOTS == stored[o].w // EPOCH_SLOTS for o, r in replayed.items())
