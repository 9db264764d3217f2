"""Eager migration of a state (``python -m sluice_job --migrate-state``, issue 41 item
3) against a real Cassandra: the rows older revisions wrote are rewritten in place in
the new revision's meaning, through the declared ``migrate`` (a row it drops becomes
a deletion), keeping their version and TTL, one microsecond after their own write
time; rows already in the revision are left alone, a second run rewrites nothing, and
rows of a newer revision or an undeclared state are refused (exit 2), naming them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice_api import cluster
from sluice_job import checkpoint_schema
from tests.support.driver import spec
from tests.support.keyed_state import prepared

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PIPELINE, NAMESPACE = "durations", "tests"
V1: dict[str, Any] = {
    "name": "durations",
    "table": "durations",
    "key": [{"name": "page", "type": "text"}],
    "columns": [{"name": "duration", "type": "bigint"}],
}
V2 = {**V1, "revision": 2, "migrate": "tests.support.transforms:seconds_to_ms"}


def migrate(
    tmp_path: Path, contact: str, keyspace: str, name: str
) -> subprocess.CompletedProcess[str]:
    body = spec(bootstrap="127.0.0.1:9", topic="t", contact=contact, keyspace=keyspace)
    body["transform"]["state"] = [V2]
    config = tmp_path / "spec.json"
    config.write_text(json.dumps(body))
    env = {
        **os.environ,
        "SLUICE_PIPELINE": PIPELINE,
        "SLUICE_NAMESPACE": NAMESPACE,
        "SLUICE_CLUSTER_ID": "tests",
        "SLUICE_EPOCH": "1",
        "SLUICE_TERMINATION_LOG": str(tmp_path / "termination"),
    }
    command = [sys.executable, "-m", "sluice_job", "--config", str(config), "--migrate-state", name]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_rows_of_older_revisions_are_rewritten_in_place_through_migrate(
    tmp_path: Path, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    prepared(cassandra, cassandra_contact, cassandra_keyspace, V1, owner=f"{NAMESPACE}/{PIPELINE}")
    for statement in checkpoint_schema.statements(cassandra_keyspace):
        cassandra.execute(statement)
    key = cluster.checkpoint_key("tests", NAMESPACE, PIPELINE)
    cassandra.execute(  # the last committed batch's version: 400
        f"INSERT INTO {cassandra_keyspace}.checkpoints (pipeline, write_version) VALUES (%s, 400)",
        (key,),
    )
    table = f"{cassandra_keyspace}.durations"
    insert = (
        f"INSERT INTO {table} (page, sluice_version, duration, sluice_deleted, sluice_revision) "
        "VALUES (%s, %s, %s, false, %s) USING TIMESTAMP %s AND TTL %s"
    )
    cassandra.execute(insert, ("/a", 100, 2, 1, 1_000, 0))
    cassandra.execute(insert, ("/a", 200, 3, None, 2_000, 3_600))  # revision 1 before it was kept
    cassandra.execute(insert, ("/b", 200, None, 1, 2_000, 0))  # migrate drops it
    cassandra.execute(insert, ("/c", 300, 5_000, 2, 3_000, 0))  # already revision 2
    cassandra.execute(insert, ("/c", 500, 6, 1, 5_000, 0))  # the batch in flight

    done = migrate(tmp_path, cassandra_contact, cassandra_keyspace, "durations")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary == {
        "state": "durations",
        "rows": 5,
        "rewritten": 3,
        "deleted": 1,
        "in_flight": 1,
    }

    rows = {
        (r.page, r.sluice_version): r
        for r in cassandra.execute(
            f"SELECT page, sluice_version, duration, sluice_deleted, sluice_revision, "
            f"WRITETIME(sluice_deleted) AS written, TTL(sluice_deleted) AS ttl FROM {table}"
        )
    }
    found = {
        k: (r.duration, r.sluice_deleted, r.sluice_revision, r.written) for k, r in rows.items()
    }
    assert found == {
        ("/a", 100): (2_000, False, 2, 1_001),
        ("/a", 200): (3_000, False, 2, 2_001),
        ("/b", 200): (None, True, 2, 2_001),
        ("/c", 300): (5_000, False, 2, 3_000),
        ("/c", 500): (6, False, 1, 5_000),
    }
    assert 3_000 < rows[("/a", 200)].ttl <= 3_600, "the row keeps its remaining TTL"
    assert rows[("/a", 100)].ttl is None

    again = migrate(tmp_path, cassandra_contact, cassandra_keyspace, "durations")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1])["rewritten"] == 0

    cassandra.execute(insert, ("/d", 400, 1, 3, 4_000, 0))
    newer = migrate(tmp_path, cassandra_contact, cassandra_keyspace, "durations")
    assert newer.returncode == 2
    assert "written by revision 3" in newer.stderr
    assert "'/d'" in newer.stderr
    unknown = migrate(tmp_path, cassandra_contact, cassandra_keyspace, "totals")
    assert unknown.returncode == 2
    assert "declares no such state" in unknown.stderr
    assert "'totals'" in unknown.stderr
