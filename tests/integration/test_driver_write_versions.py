"""Write versions across checkpoint resets and pipelines sharing a table: the newer
writes replace the older ones, in Cassandra and in Datastore.

Reproduction (before the fix, ``bfad3ac``): write versions were ``batch id * 10^6 +
epoch``. A pipeline whose checkpoint was reset, or a second pipeline writing the same
table, started again at batch 1, so its writes carried versions below the stored
ones: Cassandra kept the older cells (0 of 50 keys took the new values: new writes at
``WRITETIME`` 2000003 lost to the old 9000002), the Datastore sink counted the writes
as skipped, and the offsets committed anyway. Versions now follow the plan's wall
clock and never go back (``write_order``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from sluice_job.sinks.datastore_entities import VERSION_PROPERTY
from tests.support import datastore, state
from tests.support.driver import Driver, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

RECORDS = 50
SMALL = 5  # records per batch of the first run: ten batches, versions past batch 1's


def reset(session: Any, keyspace: str, pipeline_id: str) -> None:
    """What an operator does to start a pipeline over: delete its checkpoint rows."""
    for table in ("checkpoints", "batches", "claims"):
        session.execute(f"DELETE FROM {keyspace}.{table} WHERE pipeline = %s", (pipeline_id,))


def test_after_a_reset_and_from_another_pipeline_the_new_writes_replace_the_old_rows(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
    tmp_path: Path,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=71))
    ends = state.end_offsets(kafka_bootstrap, topic, 1)
    common = dict(
        bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
    )

    def run(harness: Driver, tag: str, cap: int) -> None:
        started = harness.start(spec(**common, options={"tag": tag}, cap=cap), epoch=1)
        pipeline_id = harness.checkpoint_key
        drain_and_stop(started, cassandra, events_table, pipeline_id, ends)

    run(driver, "v1", SMALL)
    old = state.tagged_cells(cassandra, events_table)
    assert len(old) == RECORDS
    assert {tag for tag, _ in old.values()} == {"v1"}

    reset(cassandra, events_table, driver.checkpoint_key)
    run(driver, "v2", 10_000)
    assert [b["batch_id"] for b in driver.runs[-1].batches() if b["records"]] == [1]
    after_reset = state.tagged_cells(cassandra, events_table)
    assert {tag for tag, _ in after_reset.values()} == {"v2"}, "every key takes the new value"
    assert min(w for _, w in after_reset.values()) > max(w for _, w in old.values())

    (tmp_path / "other").mkdir()
    other = Driver(tmp_path / "other", f"{driver.pipeline}-b", image_env=driver.image_env)
    try:
        run(other, "v3", 10_000)
    finally:
        other.stop_all()
    from_other = state.tagged_cells(cassandra, events_table)
    assert {tag for tag, _ in from_other.values()} == {"v3"}, "the second pipeline's writes win"
    assert min(w for _, w in from_other.values()) > max(w for _, w in after_reset.values())


def test_after_a_reset_the_datastore_sink_replaces_the_entities_instead_of_skipping_them(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    datastore_host: str,
    datastore_project: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=72))
    ends = state.end_offsets(kafka_bootstrap, topic, 1)
    pipeline_id = driver.checkpoint_key
    env = {"DATASTORE_EMULATOR_HOST": datastore_host}

    def body(tag: str, cap: int) -> dict[str, Any]:
        return spec(
            bootstrap=kafka_bootstrap,
            topic=topic,
            contact=cassandra_contact,
            keyspace=cassandra_keyspace,
            entrypoint="tests.support.datastore:keyed",
            options={"tag": tag},
            cap=cap,
            sink={"datastore": {"project": datastore_project, "kind": datastore.KIND}},
        )

    stored: Callable[[], dict[Any, Any]] = lambda: datastore.entities(  # noqa: E731
        datastore_project, datastore_host
    )
    first = driver.start(body("v1", SMALL), epoch=1, env=env)
    drain_and_stop(first, cassandra, cassandra_keyspace, pipeline_id, ends)
    old = {key: e[VERSION_PROPERTY] for key, e in stored().items()}
    assert len(old) == RECORDS

    reset(cassandra, cassandra_keyspace, pipeline_id)
    second = driver.start(body("v2", 10_000), epoch=1, env=env)
    drain_and_stop(second, cassandra, cassandra_keyspace, pipeline_id, ends)
    now = stored()
    assert {e["tag"] for e in now.values()} == {"v2"}, "every entity takes the new value"
    assert all(now[key][VERSION_PROPERTY] > version for key, version in old.items())
