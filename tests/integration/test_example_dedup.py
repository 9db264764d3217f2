"""The de-duplication example (``sluice_job.examples.dedup``, issue 41 item 4) with the
real driver: events re-sent with the same id count once in the KPI sums, through a
driver killed between the state's write and the commit, a driver frozen mid-batch and
fenced (a partitioned node's zombie, resumed after its successor went on) and an
upgrade to version 2, whose state adds a field, over version 1's state. Exact at the
end: the sums are those of the distinct events, and the ids version 2 recorded carry
the new field while version 1's read it as null."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import dedup, kpis, state
from tests.support.driver import Driver, drain_and_stop, kill_then_fence, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 4
CAP = 150  # per partition: 600 records a batch


def test_resent_events_count_once_through_a_kill_a_fenced_zombie_and_an_upgrade(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver: Driver,
) -> None:
    cassandra.execute(kpis.TABLE.format(keyspace=cassandra_keyspace))
    topic = kafka_topic(partitions=PARTITIONS)
    factory = EventFactory(seed=41)
    produce(kafka_bootstrap, topic, 1_800, factory=factory)
    produce(kafka_bootstrap, topic, 600, start=0, factory=factory)  # re-sent
    produce(kafka_bootstrap, topic, 600, start=1_200, factory=factory)  # re-sent
    v1 = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        table="page_kpis",
        entrypoint="sluice_job.examples.dedup:transform",
        options={"windowSeconds": dedup.WINDOW_S},
        cap=CAP,
    )
    v1["transform"]["state"] = [dedup.SEEN_V1]
    key = driver.checkpoint_key

    # a driver killed after its writes, before its commit; one frozen in a batch (its
    # node partitioned away) while the next took over, then resumed
    zombie, successor, frozen = kill_then_fence(driver, v1, cassandra, cassandra_keyspace)
    assert zombie.wait(300) == 3, "fenced: it cannot commit"
    late = [e for e in zombie.events() if e.get("event") == "phase" and e["batch_id"] == frozen]
    assert any(e["phase"] == "write" for e in late), "resumed, it wrote its batch late"
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(successor, cassandra, cassandra_keyspace, key, ends, timeout=600)

    # version 2 over version 1's state: old ids re-sent again, new ids and their re-sends
    produce(kafka_bootstrap, topic, 900, start=300, factory=factory)
    produce(kafka_bootstrap, topic, 1_200, start=1_800, factory=factory)
    produce(kafka_bootstrap, topic, 300, start=2_400, factory=factory)
    v2 = {
        **v1,
        "transform": {**v1["transform"], "entrypoint": "sluice_job.examples.dedup:transform_v2"},
    }
    v2["transform"]["state"] = [dedup.SEEN_V2]
    upgraded = driver.start(v2, 4)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(upgraded, cassandra, cassandra_keyspace, key, ends, timeout=600)

    # the sums of the 3,000 distinct events; v2 counted the ids from 1,800 first
    topics = (topic, "")  # no dead-letter topic: the oracle reads neither
    dedup.assert_dedup_exact(
        cassandra, cassandra_keyspace, kafka_bootstrap, topics, factory, 3_000, upgrade_seq=1_800
    )
