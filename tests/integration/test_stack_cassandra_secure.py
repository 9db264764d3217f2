"""The ``cassandra-secure`` node demands what a production cluster demands of Sluice:
TLS on the native port (a plaintext client is cut off), a valid password, and a
permission on the keyspace a role reads. Roles may have any password; the stack's
quoting gets ``"``, ``\\`` and ``'`` through."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from cassandra import AuthenticationFailed, Unauthorized
from cassandra.cluster import NoHostAvailable

from sluice_dev import versions
from tests.support.secure import CassandraSecure

pytestmark = pytest.mark.integration

AWKWARD_PASSWORD = "p\"a\\s's w0rd"


@pytest.fixture
def secure_keyspace(
    cassandra_secure: CassandraSecure, unique_name: Callable[[str], str]
) -> Iterator[Callable[[], str]]:
    """Factory: a fresh keyspace on the secure node whose table ``t`` holds the row
    ``('a', 1)``; every one made is dropped after the test."""
    admin = cassandra_secure.admin
    made: list[str] = []

    def make() -> str:
        name = unique_name("ks").replace("-", "_")[:48]
        admin.execute(
            f"CREATE KEYSPACE {name} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        made.append(name)
        admin.execute(f"CREATE TABLE {name}.t (k text PRIMARY KEY, v int)")
        admin.execute(f"INSERT INTO {name}.t (k, v) VALUES ('a', 1)")
        return name

    yield make
    for name in made:
        admin.execute(f"DROP KEYSPACE IF EXISTS {name}")


def test_superuser_connects_over_tls(cassandra_secure: CassandraSecure) -> None:
    cluster = cassandra_secure.cluster(
        cassandra_secure.superuser, cassandra_secure.superuser_password
    )
    try:
        row = cluster.connect().execute("SELECT release_version FROM system.local").one()
    finally:
        cluster.shutdown()
    assert row.release_version == versions.CASSANDRA


def test_plaintext_connection_is_refused(cassandra_secure: CassandraSecure) -> None:
    cluster = cassandra_secure.cluster(
        cassandra_secure.superuser, cassandra_secure.superuser_password, tls=False
    )
    try:
        with pytest.raises(NoHostAvailable) as refused:
            cluster.connect()
    finally:
        cluster.shutdown()
    # Cut off during the handshake (the node reads it as a bad TLS record), never
    # far enough to be asked for a password.
    errors = list(refused.value.errors.values())
    assert errors
    assert not any(isinstance(e, AuthenticationFailed) for e in errors), errors


def test_wrong_password_is_refused(cassandra_secure: CassandraSecure) -> None:
    cluster = cassandra_secure.cluster(cassandra_secure.superuser, "not-the-password")
    try:
        with pytest.raises(NoHostAvailable) as refused:
            cluster.connect()
    finally:
        cluster.shutdown()
    errors = list(refused.value.errors.values())
    assert errors
    assert all(isinstance(e, AuthenticationFailed) for e in errors), errors


def test_role_with_awkward_password_reads_only_where_granted(
    cassandra_secure: CassandraSecure,
    unique_name: Callable[[str], str],
    secure_keyspace: Callable[[], str],
) -> None:
    granted, other = secure_keyspace(), secure_keyspace()
    role = unique_name('role"\\')
    cassandra_secure.create_role(role, AWKWARD_PASSWORD, granted, ["SELECT"])

    cluster = cassandra_secure.cluster(role, AWKWARD_PASSWORD)
    try:
        session = cluster.connect()
        assert session.execute(f"SELECT v FROM {granted}.t WHERE k = 'a'").one().v == 1
        with pytest.raises(Unauthorized):
            session.execute(f"SELECT v FROM {other}.t WHERE k = 'a'")
        with pytest.raises(Unauthorized):
            session.execute(f"INSERT INTO {granted}.t (k, v) VALUES ('b', 2)")
    finally:
        cluster.shutdown()
