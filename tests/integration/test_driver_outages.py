"""A Cassandra outage is waited out by the running driver: same process, same epoch,
the batch in flight is committed once Cassandra is back, and the sink is exact.

Reproduction (before the fix): with Cassandra stopped for 20 s between a batch's write
and its commit, the driver exited 1 (``CassandraUnavailable``) within seconds of the
stop (the test this one replaces asserted exactly that); under the operator every
retry then claimed a new epoch, and ``restart.maxFailures`` consecutive exits ended
the pipeline ``Failed``.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from cassandra.cluster import NoHostAvailable, OperationTimedOut

from sluice_dev import stack as local_stack
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from tests.support import expected, state
from tests.support.agents import free_port
from tests.support.driver import Driver, drain_and_stop, spec
from tests.support.scrape import scrape
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

RECORDS = 8_000
PARTITIONS = 2
OUTAGE_SECONDS = 20.0


def test_driver_waits_out_a_cassandra_outage_and_resumes_under_the_same_epoch(
    layout: Layout,
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=PARTITIONS)
    factory = EventFactory(seed=33)
    produce(kafka_bootstrap, topic, RECORDS, factory=factory)
    pipeline_id = driver.pipeline_id  # the metrics label: no cluster id
    port = free_port()
    pipeline_spec = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        cap=400,  # 10 batches: the outage falls in the middle of the backlog
    )
    run = driver.start(
        pipeline_spec,
        epoch=1,
        failpoints="after_write=3",
        env={"SLUICE_METRICS_PORT": str(port)},
    )
    in_flight = run.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "after_write" and e["batch_id"] >= 2,
        timeout=240,
        what="a batch between its write and its commit",
    )["batch_id"]

    stopped_at = time.monotonic()
    local_stack.stop(layout, "cassandra")
    run.wait_event(
        lambda e: e.get("event") == "dependency unavailable" and e["dependency"] == "cassandra",
        timeout=120,
        what="the driver to notice the outage",
    )
    waiting = wait_for(
        lambda: (
            scrape(port).value(
                "sluice_dependency_available", pipeline=pipeline_id, dependency="cassandra"
            )
            == 0
        ),
        timeout=30,
        what="sluice_dependency_available 0 while Cassandra is down",
        ignoring=(OSError,),
    )
    assert waiting
    # The fault's length, not a wait for a condition.
    time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped_at)))
    assert run.proc.poll() is None, "the driver stays up through the outage"

    local_stack.up(layout, ["cassandra"], say=lambda _line: None)
    back_at = time.monotonic()
    resumed = run.wait_event(
        lambda e: e.get("event") == "dependency back" and e["dependency"] == "cassandra",
        timeout=180,
        what="the driver to resume once Cassandra is back",
    )
    print(f"\nresumed {time.monotonic() - back_at:.1f}s after Cassandra answered: {resumed}")
    run.wait_event(
        lambda e: e.get("event") == "batch" and e["batch_id"] == in_flight,
        timeout=120,
        what="the batch in flight during the outage to be committed",
    )
    wait_for(
        lambda: state.checkpoint_row(cassandra, events_table, driver.checkpoint_key),
        timeout=60,
        what="the tests' own Cassandra session to reconnect",
        ignoring=(NoHostAvailable, OperationTimedOut),
    )
    row = state.checkpoint_row(cassandra, events_table, driver.checkpoint_key)
    assert row.epoch == 1, "no new epoch: the same driver committed through the outage"
    assert len([e for e in run.events() if e.get("event") == "claimed"]) == 1

    # A crash after the outage loses nothing either: a new epoch resumes and drains.
    run.kill(signal.SIGKILL)
    assert run.wait(60) == -signal.SIGKILL
    again = driver.start(pipeline_spec, epoch=2)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(again, cassandra, events_table, driver.checkpoint_key, ends, timeout=300)
    rows = state.events(cassandra, events_table)
    assert len(rows) == RECORDS
    for seq in range(0, RECORDS, 97):
        got = rows[f"e-33-{seq}"]
        assert (got.event_id, got.seq, got.page) == expected.event_row(factory, seq)[:3]
    batches = state.history(cassandra, events_table, driver.checkpoint_key)
    assert [b.batch_id for b in batches] == list(range(1, len(batches) + 1))
