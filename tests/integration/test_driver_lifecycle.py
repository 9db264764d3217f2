"""Clean-stop upgrades, bounded catch-up after an outage, and a checkpoint store
that goes away mid-batch."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

PARTITIONS = 4


def first_starts(batch_event: dict[str, Any]) -> dict[int, int]:
    return {
        int(p): span[0] for parts in batch_event["ranges"].values() for p, span in parts.items()
    }


def test_sigterm_commits_the_batch_in_flight_and_v2_resumes_at_the_next_offset(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    records, cap = 6_000, 250  # 1,000 records a batch, 6 batches in all
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, records, factory=EventFactory(seed=5))
    common = {
        "bootstrap": kafka_bootstrap,
        "topic": topic,
        "contact": cassandra_contact,
        "keyspace": events_table,
        "cap": cap,
    }
    v1 = driver.start(spec(**common, options={"tag": "v1"}), epoch=1, failpoints="after_write=2")
    in_flight = v1.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "after_write" and e["batch_id"] >= 2,
        timeout=240,
        what="v1 between write and commit",
    )["batch_id"]
    v1.kill(signal.SIGTERM)
    assert v1.wait(120) == 0
    message = v1.message()
    assert message["reason"] == "Stopped"
    assert message["lastBatchId"] == in_flight  # the batch in flight was finished
    stopped_at = {int(p): o for parts in message["offsets"].values() for p, o in parts.items()}
    assert stopped_at == state.committed(cassandra, events_table, driver.checkpoint_key)

    v2_spec = spec(**common, entrypoint="tests.support.transforms:tagged_v2", options={"tag": "v2"})
    v2 = driver.start(v2_spec, epoch=2)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(
        v2,
        cassandra,
        events_table,
        driver.checkpoint_key,
        ends,
        timeout=300,
        what="v2 to commit the end offsets",
    )

    first_v2 = v2.batches()[0]
    assert first_v2["batch_id"] == in_flight + 1
    assert first_starts(first_v2) == stopped_at
    history = state.history(cassandra, events_table, driver.checkpoint_key)
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
    rows = state.events(cassandra, events_table)
    assert len(rows) == records
    for row in rows.values():
        v2_row = row.source_offset >= stopped_at[row.source_partition]
        assert row.tag == ("v2" if v2_row else "v1")
        assert row.action == (row.action.upper() if v2_row else row.action.lower())


def test_backlog_is_drained_in_capped_batches_one_at_a_time(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    cap = 500
    records = 20 * cap * PARTITIONS
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, records, factory=EventFactory(seed=9))
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap,
            topic=topic,
            contact=cassandra_contact,
            keyspace=events_table,
            cap=cap,
            interval=1.0,
        ),
        epoch=1,
    )
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(
        run,
        cassandra,
        events_table,
        driver.checkpoint_key,
        ends,
        timeout=600,
        what="the backlog to drain",
    )

    history = state.history(cassandra, events_table, driver.checkpoint_key)
    assert len(history) == 20
    for batch in history:
        spans = [span for parts in json.loads(batch.ranges).values() for span in parts.values()]
        assert all(end - start == cap for start, end in spans)
    sequence = [
        (e["phase"] if e["event"] == "phase" else "committed", e["batch_id"])
        for e in run.events()
        if e.get("event") in {"phase", "batch"}
    ]
    for batch_id in range(1, 20):
        committed = sequence.index(("committed", batch_id))
        next_read = sequence.index(("read", batch_id + 1))
        assert committed < next_read, f"batch {batch_id + 1} started before {batch_id} committed"
    print(
        f"\noutage drain: 20 batches x {cap * PARTITIONS} records; peak driver RSS "
        f"{run.peak_rss / 2**20:.0f} MiB"
    )
    assert run.peak_rss < 3 * 2**30
