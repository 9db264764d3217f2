"""One checkpoint keyspace and Cassandra role per team, on the ``cassandra-secure``
node (``PasswordAuthenticator`` + ``CassandraAuthorizer``, TLS required).

The keyspaces and tables are made as docs/checkpoint-store.md says (the tables from
``python -m sluice_job --checkpoint-schema``), and the role gets the ``GRANT``
statements that page lists, run here as written: so the page's grants are checked to
be enough for everything the checkpoint store does (claim, plan, commit, offset reset,
release, history, adopting a legacy row), and a role holding them may not touch
another team's keyspace. A real driver whose checkpoint names another team's
keyspace, or whose role lacks a grant, exits 2 at start-up naming the field, the
keyspace, the role and the permission: not an outage waited out, not a retry.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from cassandra import Unauthorized

from sluice_api import cluster
from sluice_dev.paths import REPO_ROOT
from sluice_job.checkpoint import Batch, CheckpointStore
from sluice_job.offsets import OffsetRange, TopicPartition
from tests.support.driver import Driver, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DOC = REPO_ROOT / "docs" / "checkpoint-store.md"
DOC_KEYSPACE, DOC_ROLE, DOC_PASSWORD = "team_a_sluice", "team_a", "change-me"
TP = TopicPartition("orders", 0)


def documented_grants() -> str:
    """The CQL block of the page's "One keyspace and role per team" section."""
    section = DOC.read_text().split("## One keyspace and role per team", 1)[1]
    found = re.search(r"```cql\n(.*?)```", section, re.S)
    assert found is not None, f"{DOC} lost its GRANT statements"
    return found.group(1)


@dataclass(frozen=True)
class Team:
    keyspace: str
    role: str
    password: str


@pytest.fixture
def teams(
    cassandra_secure: Any, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., Team]]:
    """``make(without="")``: a keyspace with the checkpoint tables, made by the
    administrator, and a role with the page's grants on it, but for a grant that
    starts with ``without``."""
    admin, made = cassandra_secure.admin, []

    def make(*, without: str = "") -> Team:
        suffix = unique_name("t").replace("-", "_")[-12:]
        team = Team(f"ck_{suffix}", f"role_{suffix}", secrets.token_hex(8))
        admin.execute(
            f"CREATE KEYSPACE {team.keyspace} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}",
            timeout=60,
        )
        made.append(team)
        for statement in schema_cql(team.keyspace):
            admin.execute(statement, timeout=60)
        statements = [s.strip() for s in documented_grants().split(";") if s.strip()]
        for statement in statements:
            if without and statement.startswith(without):
                continue
            statement = statement.replace(DOC_KEYSPACE, team.keyspace)
            statement = statement.replace(DOC_PASSWORD, team.password)
            admin.execute(re.sub(rf"\b{DOC_ROLE}\b", team.role, statement))
        return team

    yield make
    for team in made:
        admin.execute(f"DROP ROLE IF EXISTS {team.role}")
        admin.execute(f"DROP KEYSPACE IF EXISTS {team.keyspace}", timeout=60)


def schema_cql(keyspace: str) -> list[str]:
    """The tables' CQL as an administrator gets it: from the driver's command line."""
    done = subprocess.run(
        [sys.executable, "-m", "sluice_job", "--checkpoint-schema", keyspace],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [s.strip() for s in done.stdout.split(";") if s.strip()]


def session_as(cassandra_secure: Any, team: Team) -> Any:
    return cassandra_secure.cluster(team.role, team.password).connect()


def batch(batch_id: int, start: int, end: int) -> Batch:
    return Batch(batch_id, (OffsetRange(TP, start, end),), {TP: end}, 1000 + batch_id)


def test_the_documented_grants_are_enough_for_the_store_and_nothing_more(
    cassandra_secure: Any, teams: Callable[..., Team]
) -> None:
    team_a, team_b = teams(), teams()
    session = session_as(cassandra_secure, team_a)
    key = cluster.checkpoint_key("c1", "team-a", "orders")
    legacy = cluster.legacy_checkpoint_key("team-a", "orders")
    try:
        # A row of a driver before cluster ids, adopted by this version's driver.
        old = CheckpointStore(session, team_a.keyspace, legacy, "img:v1")
        old.ensure_schema()
        old.claim(1)
        old.plan(batch(1, 0, 10))
        old.commit(batch(1, 0, 10), datetime.now(UTC))
        store = CheckpointStore(session, team_a.keyspace, key, "img:v1", legacy=legacy)
        store.ensure_schema()
        assert store.claim(2).positions == {TP: 10}
        store.plan(batch(2, 10, 20))
        store.commit(batch(2, 10, 20), datetime.now(UTC))
        store.reset(batch(3, 20, 5), "replay-1", '{"to": "Earliest"}')
        assert store.release()
        assert [b.batch_id for b in store.history()] == [3, 2, 1]

        # The same role, another team's keyspace: refused, naming role and permission.
        other = CheckpointStore(session, team_b.keyspace, key, "img:v1")
        with pytest.raises(Unauthorized) as refused:
            other.ensure_schema()
        assert f"User {team_a.role} has no MODIFY permission" in str(refused.value)
        assert f"{team_b.keyspace}.schema_version" in str(refused.value)
        with pytest.raises(Unauthorized):
            session.execute(f"SELECT * FROM {team_b.keyspace}.checkpoints")
        # No DDL: not even in its own keyspace.
        with pytest.raises(Unauthorized):
            session.execute(f"DROP TABLE {team_a.keyspace}.batches")
    finally:
        session.cluster.shutdown()


@pytest.mark.parametrize(
    ("case", "table"),
    [("another team's keyspace", "schema_version"), ("a grant missing", "checkpoints")],
)
def test_a_driver_refused_by_cassandra_exits_2_naming_keyspace_role_and_permission(
    case: str,
    table: str,
    cassandra_secure: Any,
    teams: Callable[..., Team],
    kafka_bootstrap: str,
    kafka_topic: Any,
    secure_events_keyspace: str,
    driver: Driver,
) -> None:
    if case == "another team's keyspace":
        mine, named = teams(), teams()
    else:  # its own keyspace, without MODIFY on checkpoints: refused at the claim
        mine = named = teams(without=f"GRANT MODIFY ON TABLE {DOC_KEYSPACE}.checkpoints")
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=kafka_topic(partitions=1),
        contact=cassandra_secure.contact,
        keyspace=secure_events_keyspace,  # the sink: the administrator's
    )
    secured = {"credentialsSecret": "login", "tls": {"caSecret": "ca"}}
    body["sink"]["cassandra"] |= secured
    body["checkpoint"]["cassandra"] |= secured | {"keyspace": named.keyspace}
    env = {
        "SLUICE_SINK_CASSANDRA_USERNAME": cassandra_secure.superuser,
        "SLUICE_SINK_CASSANDRA_PASSWORD": cassandra_secure.superuser_password,
        "SLUICE_SINK_CASSANDRA_CA": cassandra_secure.ca_pem,
        "SLUICE_CHECKPOINT_CASSANDRA_USERNAME": mine.role,
        "SLUICE_CHECKPOINT_CASSANDRA_PASSWORD": mine.password,
        "SLUICE_CHECKPOINT_CASSANDRA_CA": cassandra_secure.ca_pem,
    }
    run = driver.start(body, epoch=1, env=env)
    assert run.wait(300) == 2
    message = run.message()
    assert message["reason"] == "CassandraAccessDenied"
    said = message["message"]
    assert said.startswith("checkpoint.cassandra.keyspace: ")
    assert f"Cassandra role '{mine.role}' has no MODIFY permission" in said
    assert f"(keyspace '{named.keyspace}')" in said
    assert f"GRANT MODIFY ON TABLE {named.keyspace}.{table} TO {mine.role}" in said
    events = run.events()
    assert [e["event"] for e in events if e.get("level") == "error"] == ["CassandraAccessDenied"]
    assert not [e for e in events if e.get("event") == "dependency unavailable"], "no outage"
    assert not [e for e in events if e.get("event") == "claimed"]
