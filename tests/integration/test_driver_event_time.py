"""The event-time watermark with the real driver (issue 41 item 2, its first part):
kept in the checkpoint row, it survives the driver's restart and never moves back;
records behind it go to the dead-letter topic with their reason, the others to the
sink. Event times are the records' JSON ``ts``: ``EventFactory`` spaces them 10 ms
apart by sequence number, so which records are late is known exactly."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev.events import BASE_TS_MS, EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, DriverRun, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PARTITIONS = 2
LATENESS_S = 2
STEP_MS = 10  # EventFactory's default: 100 events per second of event time


def ts(seq: int) -> int:
    return BASE_TS_MS + seq * STEP_MS


def late_count(run: DriverRun) -> int:
    return sum(int(b.get("late", 0)) for b in run.batches())


def test_the_watermark_survives_restarts_never_moves_back_and_sends_late_records_to_dead_letters(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic, letters_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    first, resent = EventFactory(seed=31), EventFactory(seed=32)
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="tests.support.transforms:late_aware",
        deadLetter={"kafka": {"topic": letters_topic}},
    )
    body["transform"]["eventTime"] = {"allowedLatenessSeconds": LATENESS_S, "late": "DeadLetter"}
    key = driver.checkpoint_key

    def run_to_end(epoch: int) -> DriverRun:
        run = driver.start(body, epoch)
        ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
        drain_and_stop(run, cassandra, events_table, key, ends, timeout=300)
        return run

    # 1,000 events, 0 to 9.99 s of event time: the watermark is the newest minus 2 s
    produce(kafka_bootstrap, topic, 1_000, factory=first)
    run = run_to_end(1)
    watermark = ts(999) - LATENESS_S * 1000
    assert state.checkpoint_row(cassandra, events_table, key).event_watermark == watermark
    assert late_count(run) == 0

    # a new driver: 200 events from the first 2 s, all behind the watermark
    produce(kafka_bootstrap, topic, 200, factory=resent)
    run = run_to_end(2)
    assert late_count(run) == 200
    row = state.checkpoint_row(cassandra, events_table, key)
    assert row.event_watermark == watermark, "a batch of late records leaves the watermark"

    # events from 9 s (on time) and the first's next 500 (to 14.99 s): it moves on
    produce(kafka_bootstrap, topic, 100, start=900, factory=resent)
    produce(kafka_bootstrap, topic, 500, start=1_000, factory=first)
    run = run_to_end(3)
    assert late_count(run) == 0
    row = state.checkpoint_row(cassandra, events_table, key)
    assert row.event_watermark == ts(1_499) - LATENESS_S * 1000

    rows = state.events(cassandra, events_table)
    expected_ids = {f"e-31-{n}" for n in range(1_500)} | {f"e-32-{n}" for n in range(900, 1_000)}
    assert set(rows) == expected_ids
    letters = state.read_topic(kafka_bootstrap, letters_topic)
    assert len(letters) == 200
    behind = (
        "is behind the watermark 2025-11-22T03:00:07.990000+00:00 "
        f"(allowed lateness {LATENESS_S} s)"
    )
    reasons = {m.headers["sluice.reason"] for m in letters}
    assert len(reasons) == 200, "each names its own event time"
    assert all(r.startswith("late: event time 2025-11-22T03:00:0") for r in reasons), reasons
    assert all(r.endswith(behind) for r in reasons), sorted(reasons)[:3]
