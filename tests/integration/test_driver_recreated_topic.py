"""A topic deleted and recreated under the same name: the checkpoint is beyond the
new partition's end. The driver says so, naming topic, partition and offsets, and
follows ``onOffsetOutOfRange``: ``fail`` stops it (exit 1), ``earliest`` reads the new
partition from its start.

Reproduction (before the fix): with ``earliest`` the driver logged "skipped records
deleted by retention" with ``skipped: 0`` and moved on, so no metric, condition or
Event showed it (the RecordsLost condition counts records, and there were 0); with
``fail`` its message blamed retention ("outside the retained range [0, 15)").
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

BEFORE, AFTER = 40, 15


def recreate(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(60)

    def created() -> bool:
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        except Exception:  # still being deleted: try again
            return False
        return True

    wait_for(created, timeout=120, what=f"topic {topic} recreated")


def test_a_recreated_topic_stops_the_driver_or_is_read_from_its_start_and_reported(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, BEFORE, factory=EventFactory(seed=81))
    body = spec(
        bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
    )
    pipeline_id = driver.checkpoint_key
    first = driver.start(body, epoch=1)
    drain_and_stop(first, cassandra, events_table, pipeline_id, {0: BEFORE})

    recreate(kafka_bootstrap, topic)
    produce(kafka_bootstrap, topic, AFTER, factory=EventFactory(seed=82))
    wait_for(
        lambda: state.end_offsets(kafka_bootstrap, topic, 1) == {0: AFTER},
        timeout=60,
        what="the new events in the recreated topic",
    )

    failing = driver.start(body, epoch=2)  # onOffsetOutOfRange: fail, the default
    assert failing.wait(300) == 1
    message = failing.message()
    assert message["reason"] == "OffsetOutOfRange"
    assert (
        f"{topic}/0: committed offset {BEFORE} is beyond the end offset {AFTER}"
        in (message["message"])
    )
    assert state.committed(cassandra, events_table, pipeline_id) == {0: BEFORE}

    body["source"]["kafka"]["onOffsetOutOfRange"] = "earliest"
    resumed = driver.start(body, epoch=3)
    drain_and_stop(resumed, cassandra, events_table, pipeline_id, {0: AFTER})
    resets = [
        e for e in resumed.events() if "beyond the end of the partition" in e.get("event", "")
    ]
    assert [(e["partition"], e["committed"], e["resumed_at"]) for e in resets] == [
        (f"{topic}/0", BEFORE, 0)
    ]
    new_ids = {str(EventFactory(seed=82).event(i)["event_id"]) for i in range(AFTER)}
    assert new_ids <= set(state.events(cassandra, events_table)), "every new event is written"
