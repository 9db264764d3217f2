"""No loss and no duplicates through SIGKILL at any phase of the batch cycle.

The driver is killed at seeded random moments inside each phase (reading, writing,
between write and commit, committing, after the commit but before its history
row), restarted with a newer epoch each time, and finally left to drain. The sink
must then hold exactly one correct row per produced event and the checkpoint must
equal the topic's end offsets.

``make test`` kills one driver per phase (five); ``SLUICE_CRASH_KILLS=8`` (or more)
repeats phases at further seeded moments, as this test did before it was cut for
CI's time: the extra kills go through the same five phases again.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import time
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import expected, state
from tests.support.driver import Driver, DriverRun, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400)]

RECORDS = 12_000
PARTITIONS = 4
CAP = 500  # per partition: 2,000 records a batch, 6 batches in all
SEED = 20261122
KILLS = int(os.environ.get("SLUICE_CRASH_KILLS", "5"))
"""Drivers killed, each inside one of the phases below (every phase at least once, so
at least five). Each killed driver dies inside its first batch, so only the kills in
``commit`` and ``after_commit`` can commit a batch (two at most for up to eight kills):
the last driver still drains four or more."""
# (phase announced in the log, failpoint pauses, kill delay range after the announcement)
KILL_POINTS: list[tuple[str, str, tuple[float, float]]] = [
    ("read", "", (0.0, 0.8)),
    ("write", "", (0.0, 0.4)),
    ("after_write", "after_write=2", (0.1, 1.5)),
    ("commit", "", (0.0, 0.02)),
    ("after_commit", "after_commit=2", (0.1, 1.5)),
]


def kill_inside(run: DriverRun, phase: str, delay: float, first_batch: int) -> int:
    """SIGKILL ``run`` ``delay`` seconds after it announces ``phase`` of any batch
    from ``first_batch`` on; returns that batch id."""
    event = run.wait_event(
        lambda e: (
            e.get("event") == "phase" and e["phase"] == phase and e["batch_id"] >= first_batch
        ),
        timeout=240,
        what=f"phase {phase}",
    )
    time.sleep(delay)  # the seeded moment inside the phase, not a wait for a condition
    run.kill(signal.SIGKILL)
    assert run.wait(60) == -signal.SIGKILL
    return int(event["batch_id"])


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=PARTITIONS)
    factory = EventFactory(seed=SEED)
    produce(kafka_bootstrap, topic, RECORDS, factory=factory)
    pipeline_spec = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        cap=CAP,
    )
    pipeline_id = driver.checkpoint_key
    assert len(KILL_POINTS) <= KILLS, "SLUICE_CRASH_KILLS: one kill per phase at least"
    rng = random.Random(SEED)
    schedule = [KILL_POINTS[i % len(KILL_POINTS)] for i in range(KILLS)]
    rng.shuffle(schedule)

    killed_in: list[tuple[str, int]] = []
    for epoch, (phase, failpoints, (low, high)) in enumerate(schedule, start=1):
        done = state.checkpoint_row(cassandra, events_table, pipeline_id)
        first = (done.batch_id + 1) if done else 1
        run = driver.start(pipeline_spec, epoch, failpoints=failpoints)
        killed_in.append((phase, kill_inside(run, phase, rng.uniform(low, high), first)))

    final = driver.start(pipeline_spec, len(schedule) + 1)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == RECORDS
    drain_and_stop(
        final,
        cassandra,
        events_table,
        pipeline_id,
        ends,
        timeout=600,
        what="the last driver to commit the topic's end offsets",
    )

    rows = state.events(cassandra, events_table)
    assert len(rows) == RECORDS
    assert expected.mismatched_events(rows, factory, RECORDS) == []

    batches = state.history(cassandra, events_table, pipeline_id)
    assert [b.batch_id for b in batches] == list(range(1, len(batches) + 1))
    _assert_ranges_tile_the_topic(batches, ends)
    _report(driver, killed_in, batches)


def _assert_ranges_tile_the_topic(batches: list[Any], ends: dict[int, int]) -> None:
    """Committed ranges follow each other per partition: no gap, no overlap."""
    import json

    position = dict.fromkeys(ends, 0)
    for batch in batches:
        for parts in json.loads(batch.ranges).values():
            for partition, (start, end) in parts.items():
                assert start == position[int(partition)], f"batch {batch.batch_id}"
                assert end - start <= CAP
                position[int(partition)] = end
    assert position == ends


def _report(driver: Driver, killed_in: list[tuple[str, int]], batches: list[Any]) -> None:
    events = [e for run in driver.runs for e in run.batches()]
    busy = sum(e["read_s"] + e["transform_s"] + e["write_s"] + e["commit_s"] for e in events)
    commits = sorted(e["commit_s"] for e in events)
    last = driver.runs[-1].batches()
    wall = sum(e["read_s"] + e["transform_s"] + e["write_s"] + e["commit_s"] for e in last)
    print(
        f"\nkill -9 run: killed in {killed_in}; {len(batches)} batches committed; "
        f"{sum(e['records'] for e in events)} records processed (incl. re-runs) in "
        f"{busy:.1f}s of batch time = {sum(e['records'] for e in events) / busy:,.0f} records/s; "
        f"last driver alone {sum(e['records'] for e in last) / max(wall, 1e-9):,.0f} records/s; "
        f"commit latency p50 {statistics.median(commits) * 1e3:.1f} ms, "
        f"p99 {commits[int(len(commits) * 0.99)] * 1e3:.1f} ms; "
        f"peak driver RSS {max(r.peak_rss for r in driver.runs) / 2**20:.0f} MiB"
    )
