"""Output and rejects come from separate Spark jobs, so a transform that decides
between them by a random number is refused before anything is written.

Reproduction (before the fix): the transform below, which flips a coin per record
in a UDF marked non-deterministic, ran and committed: of 300 records, 149 reached the
sink and 151 the dead-letter topic, 72 of them in both and 72 in neither.
"""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RECORDS = 300


def test_a_transform_deciding_by_a_random_number_is_refused_and_nothing_is_committed(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic, dead_letters = kafka_topic(partitions=2), kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=91))
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap,
            topic=topic,
            contact=cassandra_contact,
            keyspace=events_table,
            entrypoint="tests.support.transforms:coin_flip",
            deadLetter={"kafka": {"topic": dead_letters}},
        ),
        epoch=1,
    )
    code = run.wait(300)

    written = len(state.events(cassandra, events_table))
    letters = len(state.read_topic(kafka_bootstrap, dead_letters, timeout=10))
    assert (code, written, letters) == (2, 0, 0), "refused before anything is written"
    message = run.message()
    assert message["reason"] == "InvalidConfig"
    assert "spec.transform.entrypoint" in message["message"]
    assert "not deterministic" in message["message"]
    assert state.committed(cassandra, events_table, driver.checkpoint_key) == {}
