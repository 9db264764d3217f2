"""The unique-visitors example (``sluice_job.examples.unique_visitors``, issue 41 item
4) with the real driver: distinct users per page and 10-second window, each window's
row written once when the watermark passes it, exact through a driver killed between
its writes and its commit, a driver frozen in a batch and fenced once its successor
went on, and an upgrade to version 2, whose state and output add the window's views.
Records behind the watermark (if the partitions' event times drift apart by more
than the lateness) are dead letters, and the oracle leaves them out."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support.driver import Driver, kill_zombie_then_upgrade, spec
from tests.support.visitors import FLUSH, STATE_V1, STATE_V2, TABLE, assert_visitors_exact

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 4
CAP = 150


def test_distinct_visitors_per_window_are_exact_through_a_kill_a_zombie_and_an_upgrade(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver: Driver,
) -> None:
    cassandra.execute(TABLE.format(keyspace=cassandra_keyspace))
    topic, letters_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    factory = EventFactory(seed=43)
    produce(kafka_bootstrap, topic, 3_000, factory=factory)
    v1 = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        table="page_visitors",
        entrypoint="sluice_job.examples.unique_visitors:transform",
        cap=CAP,
        deadLetter={"kafka": {"topic": letters_topic}},
    )
    v1["transform"]["eventTime"] = {"allowedLatenessSeconds": 5}
    v1["transform"]["state"] = [STATE_V1]

    def second_half() -> None:
        produce(kafka_bootstrap, topic, 3_000, start=3_000, factory=factory)
        produce(kafka_bootstrap, topic, 1, start=FLUSH, factory=factory)

    v2 = {"entrypoint": "sluice_job.examples.unique_visitors:transform_v2", "state": [STATE_V2]}
    faults = (kafka_bootstrap, topic, PARTITIONS)
    kill_zombie_then_upgrade(driver, v1, v2, cassandra, cassandra_keyspace, faults, second_half)
    assert_visitors_exact(
        cassandra, cassandra_keyspace, kafka_bootstrap, (topic, letters_topic), factory, 6_000
    )
