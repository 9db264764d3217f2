"""Shared fixtures: the local stack, brought up once per test run, and per-test
isolation (a fresh Kafka topic, Cassandra keyspace or Kubernetes namespace each).

If a stack is already up (say, left running by ``make demo``), the run reuses it and
leaves it running; otherwise the run starts one and stops it at the end.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sluice_dev import stack as local_stack
from sluice_dev.paths import Layout


@pytest.fixture(scope="session")
def layout() -> Layout:
    return Layout.from_env()


@pytest.fixture(scope="session")
def stack(layout: Layout) -> Iterator[Layout]:
    """Every server of the local stack, healthy."""
    already_up = all(state.healthy for state in local_stack.status(layout))
    if not already_up:
        local_stack.up(layout)
    yield layout
    if not already_up:
        local_stack.down(layout)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names like ``<prefix>-<test name>-<random>``, safe for topics, keyspaces
    (``-`` becomes ``_``) and namespaces (at most 63 characters)."""

    def make(prefix: str) -> str:
        test = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30]
        return f"{prefix}-{test}-{uuid.uuid4().hex[:6]}".strip("-")

    return make


# -- Kafka -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_bootstrap(stack: Layout) -> str:
    from sluice_dev.servers import kafka

    return kafka.BOOTSTRAP


@pytest.fixture
def kafka_topic(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., str]]:
    """Factory: ``kafka_topic(partitions=4)`` creates a fresh topic and returns its name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created: list[str] = []

    def make(partitions: int = 4, **config: str) -> str:
        name = unique_name("t")
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
        )
        futures[name].result(timeout=30)
        created.append(name)
        return name

    yield make
    if created:
        for future in admin.delete_topics(created).values():
            future.result(timeout=30)


# -- Cassandra ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def cassandra_contact(stack: Layout) -> str:
    from sluice_dev import ports

    return f"{ports.HOST}:{ports.CASSANDRA_NATIVE}"


@pytest.fixture(scope="session")
def cassandra(cassandra_contact: str) -> Iterator[Any]:
    """A session to the stack's Cassandra node (cassandra-driver)."""
    from sluice_job.cassandra_session import connect

    cluster, session = connect([cassandra_contact], None, timeout=30)
    yield session
    cluster.shutdown()


@pytest.fixture
def cassandra_keyspace(cassandra: Any, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A fresh keyspace (SimpleStrategy, RF 1), dropped after the test."""
    name = unique_name("ks").replace("-", "_")[:48]
    cassandra.execute(
        f"CREATE KEYSPACE {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}",
        timeout=60,
    )
    yield name
    cassandra.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)
