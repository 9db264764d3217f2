"""The de-duplication example (``sluice_job.examples.dedup``, issue 41 item 4) with the
real driver: events re-sent with the same id count once in the KPI sums, through a
driver killed between the state's write and the commit, a driver frozen mid-batch and
fenced (a partitioned node's zombie, resumed after its successor went on) and an
upgrade to version 2, whose state adds a field, over version 1's state. Exact at the
end: the sums are those of the distinct events, and the ids version 2 recorded carry
the new field while version 1's read it as null."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import kpis, state
from tests.support.driver import Driver, DriverRun, drain_and_stop, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 4
CAP = 150  # per partition: 600 records a batch
SEEN_V1: dict[str, Any] = {
    "name": "seen",
    "table": "seen_events",
    "key": [{"name": "event_id", "type": "text"}],
    "ttlSeconds": 86_400,
}
SEEN_V2 = {**SEEN_V1, "columns": [{"name": "first_batch", "type": "bigint"}]}


def phase_of(run: DriverRun, phase: str, first_batch: int) -> int:
    event = run.wait_event(
        lambda e: (
            e.get("event") == "phase" and e["phase"] == phase and e["batch_id"] >= first_batch
        ),
        timeout=300,
        what=f"phase {phase} of batch {first_batch} or later",
    )
    return int(event["batch_id"])


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
        options={"windowSeconds": 10},
        cap=CAP,
    )
    v1["transform"]["state"] = [SEEN_V1]
    key = driver.checkpoint_key

    def committed() -> int:
        row = state.checkpoint_row(cassandra, cassandra_keyspace, key)
        return int(row.batch_id) if row else 0

    # a driver killed after writing a batch's state and output, before its commit
    killed = driver.start(v1, 1, failpoints="after_write=2")
    phase_of(killed, "after_write", 2)
    killed.kill(signal.SIGKILL)
    assert killed.wait(60) == -signal.SIGKILL

    # a driver frozen in a batch (its node partitioned away), fenced by the next one
    zombie = driver.start(v1, 2, failpoints="read=2")
    frozen = phase_of(zombie, "read", committed() + 1)
    zombie.signal_tree(signal.SIGSTOP)
    successor = driver.start(v1, 3)
    wait_for(lambda: committed() >= frozen + 1, timeout=300, what="the successor past it")
    zombie.signal_tree(signal.SIGCONT)
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
    v2["transform"]["state"] = [SEEN_V2]
    upgraded = driver.start(v2, 4)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(upgraded, cassandra, cassandra_keyspace, key, ends, timeout=600)

    assert kpis.sums(cassandra, cassandra_keyspace) == kpis.expected_sums(
        factory, range(3_000), window=10
    )
    first_batches: dict[str, int | None] = {}
    for row in cassandra.execute(
        f"SELECT event_id, first_batch FROM {cassandra_keyspace}.seen_events", timeout=120
    ):
        first_batches[row.event_id] = row.first_batch
    assert set(first_batches) == {f"e-41-{n}" for n in range(3_000)}
    assert all(first_batches[f"e-41-{n}"] is None for n in range(1_800)), "v1's rows"
    assert all(first_batches[f"e-41-{n}"] is not None for n in range(1_800, 3_000)), "v2's"
