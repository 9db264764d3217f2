"""The local Cassandra node does what Sluice's checkpoint store relies on: lightweight
transactions (compare-and-set) that apply once and, when they don't, say why by
returning the row that is there."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev import versions

pytestmark = pytest.mark.integration


def _claims_table(session: Any, keyspace: str) -> str:
    table = f"{keyspace}.claims"
    session.execute(f"CREATE TABLE {table} (pipeline text PRIMARY KEY, epoch bigint, owner text)")
    return table


def test_node_is_the_pinned_release(cassandra: Any) -> None:
    row = cassandra.execute("SELECT release_version FROM system.local").one()
    assert row.release_version == versions.CASSANDRA


def test_insert_if_not_exists_applies_once(cassandra: Any, cassandra_keyspace: str) -> None:
    table = _claims_table(cassandra, cassandra_keyspace)
    insert = cassandra.prepare(
        f"INSERT INTO {table} (pipeline, epoch, owner) VALUES (?, ?, ?) IF NOT EXISTS"
    )

    first = cassandra.execute(insert, ("page-kpis", 1, "driver-1"))
    assert first.was_applied
    assert first.one().applied is True

    again = cassandra.execute(insert, ("page-kpis", 1, "driver-1"))
    assert not again.was_applied
    row = again.one()
    assert (row.applied, row.pipeline, row.epoch, row.owner) == (
        False,
        "page-kpis",
        1,
        "driver-1",
    )

    rival = cassandra.execute(insert, ("page-kpis", 2, "driver-2"))
    assert not rival.was_applied
    assert (rival.one().epoch, rival.one().owner) == (1, "driver-1")


def test_conditional_update_fences_a_stale_epoch(cassandra: Any, cassandra_keyspace: str) -> None:
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    table = _claims_table(cassandra, cassandra_keyspace)
    cassandra.execute(
        f"INSERT INTO {table} (pipeline, epoch, owner) VALUES ('p', 3, 'driver-3') IF NOT EXISTS"
    )
    claim = cassandra.prepare(
        f"UPDATE {table} SET epoch = ?, owner = ? WHERE pipeline = ? IF epoch < ?"
    )

    newer = cassandra.execute(claim, (4, "driver-4", "p", 4))
    assert newer.was_applied

    stale = cassandra.execute(claim, (3, "driver-3", "p", 3))
    assert not stale.was_applied
    assert stale.one().epoch == 4

    serial_read = SimpleStatement(
        f"SELECT epoch, owner FROM {table} WHERE pipeline = 'p'",
        consistency_level=ConsistencyLevel.SERIAL,
    )
    row = cassandra.execute(serial_read).one()
    assert (row.epoch, row.owner) == (4, "driver-4")
