"""Checkpoint rows written before cluster ids are adopted exactly once, on the real
Cassandra node (its Paxos, its null conditions), by the store the driver uses.

A "legacy" store is keyed ``namespace/name`` and adopts nothing: exactly what a
driver before cluster ids did with the same tables. Stores of this version are keyed
``cluster/namespace/name`` and name the legacy key (``sluice_job.adoption``). The
real driver's side (no re-read, no skip, through Spark and the sink) is
``test_checkpoint_clusters``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from sluice_api import cluster
from sluice_job.checkpoint import Batch, CheckpointStore, FencedError
from sluice_job.offsets import OffsetRange, TopicPartition
from tests.support import state

pytestmark = pytest.mark.integration

NAMESPACE, NAME = "team-a", "orders"
LEGACY = cluster.legacy_checkpoint_key(NAMESPACE, NAME)
TP = TopicPartition("orders", 0)


def key(cluster_id: str) -> str:
    return cluster.checkpoint_key(cluster_id, NAMESPACE, NAME)


@pytest.fixture
def store(cassandra: Any, cassandra_keyspace: str) -> Callable[..., CheckpointStore]:
    def make(pipeline: str, legacy: str | None = LEGACY) -> CheckpointStore:
        made = CheckpointStore(cassandra, cassandra_keyspace, pipeline, "img:v1", legacy=legacy)
        made.ensure_schema()
        return made

    return make


def batch(batch_id: int, start: int, end: int, version: int) -> Batch:
    return Batch(batch_id, (OffsetRange(TP, start, end),), {TP: end}, version)


def legacy_driver(make: Callable[..., CheckpointStore]) -> CheckpointStore:
    """An old-version driver at epoch 1: batches 1 and 2 committed, 3 planned."""
    old = make(LEGACY, legacy=None)
    old.claim(1)
    for batch_id in (1, 2):
        planned = batch(batch_id, (batch_id - 1) * 100, batch_id * 100, 1000 + batch_id)
        old.plan(planned)
        old.commit(planned, datetime.now(UTC))
    old.plan(batch(3, 200, 300, 1003))
    return old


def test_a_legacy_row_is_adopted_once_and_its_old_driver_is_fenced(
    store: Callable[..., CheckpointStore],
    cassandra: Any,
    cassandra_keyspace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = legacy_driver(store)
    new = store(key("cluster-a"))
    with caplog.at_level(logging.INFO, logger="sluice_job"):
        adopted = new.claim(2)

    assert (adopted.batch_id, adopted.positions, adopted.version) == (2, {TP: 200}, 1002)
    assert adopted.planned == batch(3, 200, 300, 1003), "the planned batch is re-run as planned"
    [line] = [r for r in caplog.records if r.getMessage() == "adopted legacy checkpoint"]
    fields = line.__dict__["fields"]
    assert (fields["legacy"], fields["key"], fields["batch_id"]) == (LEGACY, key("cluster-a"), 2)
    # The old driver cannot commit its planned batch any more: the legacy row is fenced.
    with pytest.raises(FencedError) as fenced:
        old.commit(batch(3, 200, 300, 1003), datetime.now(UTC))
    assert fenced.value.held_by == 2
    legacy_row = state.checkpoint_row(cassandra, cassandra_keyspace, LEGACY)
    assert (legacy_row.adopted_by, legacy_row.epoch, legacy_row.batch_id) == (
        key("cluster-a"),
        2,
        2,
    )
    own = state.checkpoint_row(cassandra, cassandra_keyspace, key("cluster-a"))
    assert own.adopted_from == LEGACY
    # History goes on: the adopted batch's row, as its driver (epoch 1) wrote it.
    [carried] = state.history(cassandra, cassandra_keyspace, key("cluster-a"))
    assert (carried.batch_id, carried.epoch, carried.owner) == (2, 1, old.owner)
    assert json.loads(carried.ranges) == {"orders": {"0": [100, 200]}}

    # The new driver goes on from there, batch ids and versions continuing.
    new.commit(batch(3, 200, 300, 1003), datetime.now(UTC))
    assert [b.batch_id for b in state.history(cassandra, cassandra_keyspace, key("cluster-a"))] == [
        2,
        3,
    ]

    # Exactly once: a later driver of the same cluster claims its own row...
    later = store(key("cluster-a"))
    assert later.claim(3).batch_id == 3
    assert state.checkpoint_row(cassandra, cassandra_keyspace, LEGACY).epoch == 2
    # ...and another cluster sharing the keyspace starts afresh under its own key.
    other = store(key("cluster-b"))
    with caplog.at_level(logging.INFO, logger="sluice_job"):
        fresh = other.claim(1)
    assert (fresh.batch_id, fresh.positions) == (0, {})
    assert any(r.getMessage() == "legacy checkpoint adopted elsewhere" for r in caplog.records)
    assert state.checkpoint_row(cassandra, cassandra_keyspace, LEGACY).adopted_by == key(
        "cluster-a"
    )


def test_a_driver_that_died_between_fence_and_copy_leaves_the_adoption_to_the_next(
    store: Callable[..., CheckpointStore], cassandra: Any, cassandra_keyspace: str
) -> None:
    legacy_driver(store)
    # What a driver of epoch 2 left when it died right after fencing the legacy row.
    cassandra.execute(
        f"UPDATE {cassandra_keyspace}.checkpoints SET epoch = 2, owner = %s, adopted_by = %s "
        "WHERE pipeline = %s IF epoch < 2",
        (uuid.uuid4(), key("cluster-a"), LEGACY),
    )
    assert state.checkpoint_row(cassandra, cassandra_keyspace, key("cluster-a")) is None
    # Another cluster does not take it...
    assert store(key("cluster-b")).claim(5).batch_id == 0
    # ...an older driver of this cluster is fenced, naming the epoch that holds it...
    with pytest.raises(FencedError) as fenced:
        store(key("cluster-a")).claim(2)
    assert fenced.value.held_by == 2
    # ...and the next one adopts where the legacy row stands.
    resumed = store(key("cluster-a")).claim(3)
    assert (resumed.batch_id, resumed.positions) == (2, {TP: 200})
    assert resumed.planned == batch(3, 200, 300, 1003)


def test_a_driver_overtaken_between_fence_and_copy_is_fenced_and_makes_no_row(
    store: Callable[..., CheckpointStore], cassandra: Any, cassandra_keyspace: str
) -> None:
    """Driver X (epoch 2) fences the legacy row; driver Y (epoch 3) fences it again
    before X copies it. X must leave (a fresh row of X's would have Y start from
    nothing), and Y adopts the positions."""
    legacy_driver(store)
    x = store(key("cluster-a"))
    assert x._fence_legacy(2, None)
    before = state.checkpoint_row(cassandra, cassandra_keyspace, LEGACY)
    y = store(key("cluster-a"))
    assert y._fence_legacy(3, key("cluster-a"))
    with pytest.raises(FencedError) as fenced:
        x._copy_legacy(2, before)
    assert fenced.value.held_by == 3
    assert state.checkpoint_row(cassandra, cassandra_keyspace, key("cluster-a")) is None
    assert y.claim(3).positions == {TP: 200}


def test_two_clusters_keep_apart_and_never_fence_each_other(
    store: Callable[..., CheckpointStore], cassandra: Any, cassandra_keyspace: str
) -> None:
    a, b = store(key("cluster-a"), legacy=None), store(key("cluster-b"), legacy=None)
    a.claim(1)
    b.claim(1)  # the same epoch: under one shared key this claim was refused
    a.plan(batch(1, 0, 10, 1))
    b.plan(batch(1, 0, 70, 1))
    a.commit(batch(1, 0, 10, 1), datetime.now(UTC))
    b.commit(batch(1, 0, 70, 1), datetime.now(UTC))
    assert a.load().positions == {TP: 10}
    assert b.load().positions == {TP: 70}
    for cluster_id, epochs in (("cluster-a", [1]), ("cluster-b", [1])):
        claims = state.claims(cassandra, cassandra_keyspace, key(cluster_id))
        assert [c.epoch for c in claims] == epochs
    assert state.checkpoint_row(cassandra, cassandra_keyspace, LEGACY) is None
