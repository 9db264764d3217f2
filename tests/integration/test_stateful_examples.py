"""The stateful examples with the real driver (issue 41 item 4): unique visitors per
page and 10-second window (``sluice_job.examples.unique_visitors``, a window state)
and sessions per user (``sluice_job.examples.sessions``, a session state), each row
written once when the watermark passes it, exact through a driver killed between its
writes and its commit, a driver frozen in a batch and fenced once its successor went
on, and an upgrade to version 2, whose state and output add a field (the window's
views, the session's pages). Records behind the watermark are dead letters, and the
oracle leaves them out. The sessions case is in ``make test-long`` (tests/conftest.py):
its faults are the unique visitors', and ``test_sessions.py`` covers the sessions."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.produce import produce
from tests.support.driver import Driver, kill_zombie_then_upgrade, spec
from tests.support.stateful_examples import EXAMPLES, HALF

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 4
CAP = 150
SEEDS = {"unique-visitors": 43, "sessions": 47}
"""The examples tested here (``dedup`` has its own test, ``test_example_dedup.py``)."""


@pytest.mark.parametrize("name", SEEDS)
def test_a_stateful_example_is_exact_through_a_kill_a_zombie_and_an_upgrade(
    name: str,
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver: Driver,
) -> None:
    example = EXAMPLES[name]
    cassandra.execute(example.create.format(keyspace=cassandra_keyspace))
    topic, letters_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    factory = example.factory(SEEDS[name])
    produce(kafka_bootstrap, topic, HALF, factory=factory)
    v1 = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        table=example.table,
        entrypoint=example.module + "transform",
        cap=CAP,
        deadLetter={"kafka": {"topic": letters_topic}},
    )
    if example.lateness_seconds is not None:
        v1["transform"]["eventTime"] = {"allowedLatenessSeconds": example.lateness_seconds}
    v1["transform"]["state"] = [example.v1]

    def second_half() -> None:
        produce(kafka_bootstrap, topic, HALF, start=HALF, factory=factory)
        if example.flush is not None:
            produce(kafka_bootstrap, topic, 1, start=example.flush, factory=factory)

    faults = (kafka_bootstrap, topic, PARTITIONS)
    kill_zombie_then_upgrade(
        driver, v1, example.upgrade, cassandra, cassandra_keyspace, faults, second_half
    )
    example.exact(
        cassandra, cassandra_keyspace, kafka_bootstrap, (topic, letters_topic), factory, 2 * HALF
    )
