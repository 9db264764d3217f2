"""A stateful transform run by the real driver (issue 41 item 1): each page's total
of events, kept as keyed state in Cassandra, is exact after drivers killed between
the state's write and the batch's commit and inside the write, and equals what the
sink holds; a state whose table does not fit is refused at start (exit 2) with the
column named, before any batch."""

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
from tests.support.transforms import PAGE_TOTALS_STATE

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


def totals(cassandra: Any, keyspace: str) -> dict[str, int]:
    """Each page's newest state row: its total."""
    newest: dict[str, tuple[int, int]] = {}
    for row in cassandra.execute(f"SELECT page, sluice_version, views FROM {keyspace}.page_totals"):
        if row.page not in newest or row.sluice_version > newest[row.page][0]:
            newest[row.page] = (row.sluice_version, row.views)
    return {page: views for page, (_, views) in newest.items()}


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
