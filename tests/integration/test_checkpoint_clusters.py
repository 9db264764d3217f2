"""Real drivers and one checkpoint keyspace across clusters (issue 22, finding 8).

Two Kubernetes clusters run a pipeline of the same namespace and name against the
same checkpoint keyspace: each driver keys its rows by its cluster id, so neither
fences the other and each checkpoint and sink stays exact. A checkpoint left by a
driver before cluster ids (rows keyed ``namespace/name``) is adopted by the next
driver: it resumes where that one stopped, with no record read twice or skipped.
The store's side of adoption (the old driver fenced, exactly once, a driver dying
mid-way) is ``test_checkpoint_adoption``.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, DriverRun, drain_and_stop, spec
from tests.support.transforms import EVENTS_TABLE
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 2
CAP = 250


def committed_or_exited(run: DriverRun, session: Any, keyspace: str, key: str) -> dict[int, int]:
    if run.proc.poll() is not None:
        tail = run.log.read_text(errors="replace")[-3000:]
        raise AssertionError(f"driver exited {run.proc.returncode}:\n{tail}")
    return state.committed(session, keyspace, key)


def assert_tiled(history: list[Any], ends: Mapping[int, int]) -> None:
    """The batches' ranges cover [0, end) of every partition exactly once: nothing
    read twice, nothing skipped."""
    for partition, end in ends.items():
        spans = sorted(
            tuple(span)
            for batch in history
            for parts in json.loads(batch.ranges).values()
            for p, span in parts.items()
            if int(p) == partition
        )
        position = 0
        for start, stop in spans:
            assert start == position, (partition, spans)
            position = stop
        assert position == end, (partition, spans)


def test_two_clusters_run_the_same_pipeline_on_one_keyspace_without_fencing(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
    tmp_path: Path,
) -> None:
    cassandra.execute(EVENTS_TABLE.format(keyspace=events_table).replace(".events", ".events_b"))
    other = Driver(
        tmp_path / "cluster-b", driver.pipeline, cluster="cluster-b", image_env=driver.image_env
    )
    other.workdir.mkdir()
    driver.cluster = "cluster-a"
    topics = {"a": kafka_topic(partitions=PARTITIONS), "b": kafka_topic(partitions=PARTITIONS)}
    produce(kafka_bootstrap, topics["a"], 1200, factory=EventFactory(seed=41))
    produce(kafka_bootstrap, topics["b"], 800, factory=EventFactory(seed=42))
    common = {"bootstrap": kafka_bootstrap, "contact": cassandra_contact, "cap": CAP}
    try:
        # Both at epoch 1: under one shared row the second claim would be refused.
        runs = {
            "a": driver.start(
                spec(**common, topic=topics["a"], keyspace=events_table, options={"tag": "A"}),
                epoch=1,
            ),
            "b": other.start(
                spec(
                    **common,
                    topic=topics["b"],
                    keyspace=events_table,
                    table="events_b",
                    options={"tag": "B"},
                ),
                epoch=1,
            ),
        }
        harnesses = {"a": driver, "b": other}
        for name, run in runs.items():
            key = harnesses[name].checkpoint_key
            ends = state.end_offsets(kafka_bootstrap, topics[name], PARTITIONS)
            wait_for(
                lambda run=run, key=key, ends=ends: (
                    committed_or_exited(run, cassandra, events_table, key) == ends
                ),
                timeout=600,
                what=f"cluster {name}'s driver to commit its topic's end offsets",
            )
        for run in runs.values():
            run.kill(signal.SIGTERM)
        assert [run.wait(120) for run in runs.values()] == [0, 0], "neither was fenced"
    finally:
        other.stop_all()

    for name, table, count in (("a", "events", 1200), ("b", "events_b", 800)):
        key = harnesses[name].checkpoint_key
        assert [c.epoch for c in state.claims(cassandra, events_table, key)] == [1]
        history = state.history(cassandra, events_table, key)
        assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
        assert_tiled(history, state.end_offsets(kafka_bootstrap, topics[name], PARTITIONS))
        rows = list(cassandra.execute(f"SELECT tag, source_topic FROM {events_table}.{table}"))
        assert len(rows) == count
        assert {(r.tag, r.source_topic) for r in rows} == {(name.upper(), topics[name])}
    assert state.checkpoint_row(cassandra, events_table, driver.pipeline_id) is None


def as_legacy(session: Any, keyspace: str, key: str, legacy: str) -> None:
    """Move a pipeline's rows to the key drivers used before cluster ids: what such a
    driver leaves in the same tables (no ``adopted_by``, no ``adopted_from``)."""
    for table in ("checkpoints", "batches", "claims"):
        for row in session.execute(f"SELECT * FROM {keyspace}.{table} WHERE pipeline = %s", (key,)):
            values = {k: v for k, v in row._asdict().items() if v is not None} | {
                "pipeline": legacy
            }
            columns = ", ".join(values)
            marks = ", ".join(["%s"] * len(values))
            session.execute(
                f"INSERT INTO {keyspace}.{table} ({columns}) VALUES ({marks})",
                tuple(values.values()),
            )
        session.execute(f"DELETE FROM {keyspace}.{table} WHERE pipeline = %s", (key,))


def test_an_upgraded_driver_adopts_the_legacy_checkpoint_with_no_reread_and_no_skip(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, 1000, factory=EventFactory(seed=43))
    common = {
        "bootstrap": kafka_bootstrap,
        "topic": topic,
        "contact": cassandra_contact,
        "keyspace": events_table,
        "cap": CAP,
    }
    before = driver.start(spec(**common, options={"tag": "old"}), epoch=1)
    first_ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(before, cassandra, events_table, driver.checkpoint_key, first_ends)
    legacy = driver.pipeline_id
    as_legacy(cassandra, events_table, driver.checkpoint_key, legacy)
    legacy_batches = state.history(cassandra, events_table, legacy)
    last_legacy = legacy_batches[-1].batch_id

    produce(kafka_bootstrap, topic, 1000, factory=EventFactory(seed=44))
    after = driver.start(spec(**common, options={"tag": "new"}), epoch=2)
    adopted = after.wait_event(
        lambda e: e.get("event") == "adopted legacy checkpoint",
        timeout=300,
        what="the driver to adopt the legacy checkpoint",
    )
    assert (adopted["legacy"], adopted["key"]) == (legacy, driver.checkpoint_key)
    assert adopted["batch_id"] == last_legacy
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(after, cassandra, events_table, driver.checkpoint_key, ends)

    history = state.history(cassandra, events_table, driver.checkpoint_key)
    assert [b.batch_id for b in history] == list(range(last_legacy, last_legacy + len(history)))
    assert history[0].epoch == 1, "the adopted batch's history row, as its driver wrote it"
    assert_tiled(legacy_batches + history[1:], ends)
    rows = state.events(cassandra, events_table)
    assert len(rows) == 2000
    for row in rows.values():
        read_before = row.source_offset < first_ends[row.source_partition]
        assert row.tag == ("old" if read_before else "new"), row.event_id
    legacy_row = state.checkpoint_row(cassandra, events_table, legacy)
    assert (legacy_row.adopted_by, legacy_row.epoch) == (driver.checkpoint_key, 2)
    assert [c.epoch for c in state.claims(cassandra, events_table, driver.checkpoint_key)] == [2]

    again = driver.start(spec(**common, options={"tag": "new"}), epoch=3)
    again.wait_event(lambda e: e.get("event") == "claimed", timeout=300, what="the next claim")
    again.kill(signal.SIGTERM)
    assert again.wait(120) == 0
    assert not [e for e in again.events() if e.get("event") == "adopted legacy checkpoint"]
    assert state.checkpoint_row(cassandra, events_table, legacy).epoch == 2, "adopted once"
