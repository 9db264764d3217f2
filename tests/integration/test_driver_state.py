"""A stateful transform run by the real driver (issue 41 items 1 and 3): each page's
total of events, kept as keyed state in Cassandra, is exact after drivers killed
between the state's write and the batch's commit and inside the write, and equals
what the sink holds; a warm handover to a version whose state changes meaning (and
migrates) has its standby warm up on the old version's rows, migrated, and goes on
exact; a state whose table does not fit is refused at start (exit 2) with the column
named, before any batch."""

from __future__ import annotations

import collections
import random
import signal
import time
from typing import Any

import pytest

from sluice_api.exitcodes import ExitCode
from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, DriverRun, drain_and_stop, spec
from tests.support.transforms import PAGE_TIME_V1, PAGE_TIME_V2, PAGE_TOTALS_STATE
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

RECORDS = 4_000
PARTITIONS = 4
CAP = 250  # per partition: 1,000 records a batch
SEED = 20261203


def kill_in(run: DriverRun, phase: str, delay: float, first_batch: int) -> None:
    run.wait_phase(phase, first_batch)
    time.sleep(delay)  # a moment inside the phase, not a wait for a condition
    run.kill(signal.SIGKILL)
    assert run.wait(60) == -signal.SIGKILL


def newest(cassandra: Any, keyspace: str, table: str, column: str) -> dict[str, int]:
    """Each page's newest row of state ``table``: its ``column``."""
    found: dict[str, tuple[int, int]] = {}
    query = f"SELECT page, sluice_version, {column} FROM {keyspace}.{table}"
    for row in cassandra.execute(query):
        if row.page not in found or row.sluice_version > found[row.page][0]:
            found[row.page] = (row.sluice_version, getattr(row, column))
    return {page: value for page, (_, value) in found.items()}


def totals(cassandra: Any, keyspace: str) -> dict[str, int]:
    return newest(cassandra, keyspace, "page_totals", "views")


def newest_durations(cassandra: Any, keyspace: str) -> dict[str, int]:
    """Each page's time, as the revision of its newest row keeps it."""
    return newest(cassandra, keyspace, "page_time", "duration")


def test_page_totals_are_exact_through_kills_between_state_and_commit(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=SEED))
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="tests.support.transforms:page_totals",
        cap=CAP,
    )
    body["transform"]["state"] = [PAGE_TOTALS_STATE]
    rng = random.Random(SEED)
    for epoch, (phase, failpoints) in enumerate(
        [("after_write", "after_write=2"), ("write", "")], start=1
    ):
        done = state.checkpoint_row(cassandra, events_table, driver.checkpoint_key)
        run = driver.start(body, epoch, failpoints=failpoints)
        kill_in(run, phase, rng.uniform(0.1, 1.0), (done.batch_id + 1) if done else 2)
    final = driver.start(body, 3)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(final, cassandra, events_table, driver.checkpoint_key, ends, timeout=600)

    rows = state.events(cassandra, events_table)
    assert len(rows) == RECORDS
    per_page = collections.Counter(row.page for row in rows.values())
    assert totals(cassandra, events_table) == dict(per_page)
    assert sum(per_page.values()) == RECORDS


def test_a_warm_handover_to_a_state_that_changes_meaning_warms_up_on_it_migrated(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    """v1 keeps each page's time in seconds, v2 in milliseconds (revision 2, with a
    ``migrate``). v2 starts as v1's standby (``upgrade.mode: WarmHandover``): its
    warm-up runs v2's transform on the last committed records against v1's rows,
    which it reads migrated, and writes nothing; once v1 has stopped cleanly, v2 takes
    over. Every page's time at the end is its events in milliseconds: v1's rows
    migrated once, none written by the warm-up, v2's added in its own unit."""
    topic = kafka_topic(partitions=PARTITIONS)
    factory = EventFactory(seed=SEED)
    produce(kafka_bootstrap, topic, RECORDS // 2, factory=factory)
    v1 = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="tests.support.transforms:page_seconds",
        cap=CAP,
    )
    v1["transform"]["state"] = [PAGE_TIME_V1]
    v1["upgrade"] = {"mode": "WarmHandover"}
    key = driver.checkpoint_key
    old = driver.start(v1, 1)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: state.committed(cassandra, events_table, key) == ends,
        timeout=400,
        what="v1 through the first half",
    )
    in_seconds = newest_durations(cassandra, events_table)

    v2 = {
        **v1,
        "transform": {
            **v1["transform"],
            "entrypoint": "tests.support.transforms:page_milliseconds",
        },
    }
    v2["transform"]["state"] = [PAGE_TIME_V2]
    standby = driver.start(v2, 2, env={"SLUICE_STANDBY": "1"})
    warmed = standby.wait_event(
        lambda e: e.get("event") in ("standby warm-up", "standby warm-up read skipped"),
        timeout=400,
        what="the standby's warm-up",
    )
    assert warmed["event"] == "standby warm-up", warmed
    # the pages of the last committed records, each its v1 time migrated plus theirs
    assert 0 < warmed["state_rows"]["durations"] <= len(in_seconds)
    assert newest_durations(cassandra, events_table) == in_seconds, "the warm-up wrote no state"
    old.kill(signal.SIGTERM)
    assert old.wait(120) == 0
    produce(kafka_bootstrap, topic, RECORDS - RECORDS // 2, start=RECORDS // 2, factory=factory)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(standby, cassandra, events_table, key, ends, timeout=600)

    rows = state.events(cassandra, events_table)
    assert len(rows) == RECORDS
    per_page = collections.Counter(row.page for row in rows.values())
    assert newest_durations(cassandra, events_table) == {
        page: events * 1_000 for page, events in per_page.items()
    }
    assert {e["epoch"] for e in standby.batches()} == {2}


def test_a_state_table_that_does_not_fit_is_refused_at_start(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    cassandra.execute(
        f"CREATE TABLE {events_table}.page_totals (page text, sluice_version bigint, "
        "views int, sluice_deleted boolean, PRIMARY KEY ((page), sluice_version)) "
        f"WITH comment = 'sluice state totals of pipeline tests/{driver.pipeline}'"
    )
    topic = kafka_topic(partitions=1)
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="tests.support.transforms:page_totals",
    )
    body["transform"]["state"] = [PAGE_TOTALS_STATE]
    run = driver.start(body, 1)
    assert run.wait(180) == ExitCode.INVALID_CONFIG
    message = run.message()
    assert message["reason"] == "InvalidConfig"
    assert "column views is int in the table, declared bigint" in message["message"]
    assert state.history(cassandra, events_table, driver.checkpoint_key) == []
