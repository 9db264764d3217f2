"""Role names and passwords chosen by tests reach Cassandra literally, whatever
quotes and backslashes they hold."""

from __future__ import annotations

import pytest

from sluice_dev import cql

pytestmark = pytest.mark.unit


def test_password_quotes_are_doubled_and_backslashes_kept() -> None:
    statement = cql.create_login_role('rö"le', "p\"a\\s's")
    assert statement == ('CREATE ROLE "rö""le" WITH PASSWORD = \'p"a\\s\'\'s\' AND LOGIN = true')


def test_grant_quotes_keyspace_and_role() -> None:
    assert cql.grant_on_keyspace("SELECT", "ks_1", 'a"b') == (
        'GRANT SELECT ON KEYSPACE "ks_1" TO "a""b"'
    )


def test_grant_refuses_an_unknown_permission() -> None:
    with pytest.raises(ValueError, match="SELECT; DROP"):
        cql.grant_on_keyspace("SELECT; DROP", "ks", "r")
