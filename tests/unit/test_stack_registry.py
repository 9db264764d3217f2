"""Optional servers (the secure Cassandra node) start only when named: not with
``sluice-dev up`` nor the ``stack`` fixture, and not when a test asks for the plain
``cassandra``."""

from __future__ import annotations

import pytest

from sluice_dev import registry, stack

pytestmark = pytest.mark.unit


def test_the_default_stack_leaves_out_optional_servers() -> None:
    names = [server.name for server in stack.with_requirements(None)]
    assert "cassandra-secure" not in names
    assert {"kafka", "cassandra"} <= set(names)
    assert [s.name for s in registry.defaults()] == names


def test_asking_for_cassandra_starts_only_cassandra() -> None:
    assert [server.name for server in stack.with_requirements(["cassandra"])] == ["cassandra"]


def test_an_optional_server_starts_when_named() -> None:
    assert [s.name for s in stack.with_requirements(["cassandra-secure"])] == ["cassandra-secure"]
