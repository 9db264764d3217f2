"""Shared fixtures: the local stack, brought up once per test run, and per-test
isolation (a fresh Kafka topic, Cassandra keyspace or Kubernetes namespace each).

Servers start on first use, so ``pytest -m unit`` starts none and a Kafka test
starts only Kafka. Servers already up (say, left running by ``make demo``) are
reused and left running; those the run started are stopped at its end.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice_dev import registry
from sluice_dev import stack as local_stack
from sluice_dev.paths import Layout


@pytest.fixture(scope="session")
def layout() -> Layout:
    return Layout.from_env()


class StackServers:
    """Starts servers of the local stack on first use, once per test run, and stops
    at the end exactly those it started (a stack left up by ``make demo`` stays up)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.started: set[str] = set()

    def ensure(self, *names: str) -> Layout:
        wanted = local_stack.with_requirements(names)
        down = [s.name for s in wanted if not local_stack.health(s, self.layout).healthy]
        if down:
            local_stack.up(self.layout, down, say=lambda _line: None)
            self.started.update(down)
        return self.layout

    def stop_started(self) -> None:
        for server in reversed(local_stack.with_requirements(self.started)):
            if server.name in self.started:
                local_stack.stop(self.layout, server.name)


@pytest.fixture(scope="session")
def servers(layout: Layout) -> Iterator[StackServers]:
    manager = StackServers(layout)
    yield manager
    manager.stop_started()


@pytest.fixture(scope="session")
def stack(servers: StackServers) -> Layout:
    """Every server of the local stack, healthy."""
    return servers.ensure(*(s.name for s in registry.SERVERS))


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
def kafka_bootstrap(servers: StackServers) -> str:
    from sluice_dev.servers import kafka

    servers.ensure(kafka.NAME)
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
def cassandra_contact(servers: StackServers) -> str:
    from sluice_dev import ports

    servers.ensure("cassandra")
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


# -- the driver --------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark_jars(layout: Layout) -> tuple[Path, ...]:
    from sluice_dev import stack as provisioning
    from sluice_dev.servers.spark import NAME, spark_jars

    provisioning.provision(layout, [NAME], say=lambda _line: None)
    return tuple(spark_jars(layout))


@pytest.fixture
def events_table(cassandra: Any, cassandra_keyspace: str) -> str:
    """The tagged events table in the test's keyspace; returns the keyspace."""
    from tests.support.transforms import EVENTS_TABLE

    cassandra.execute(EVENTS_TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    return cassandra_keyspace


@pytest.fixture
def driver(
    tmp_path: Path, spark_jars: tuple[Path, ...], unique_name: Callable[[str], str]
) -> Iterator[Any]:
    """Starts real driver processes for one pipeline; kills leftovers afterwards."""
    from tests.support.driver import Driver

    harness = Driver(tmp_path, unique_name("p")[:50], spark_jars=spark_jars)
    yield harness
    harness.stop_all()
