"""Temporary fixtures for the Kafka, Cassandra and Spark stack tests.

They exist until the shared fixtures of ``tests/conftest.py`` (``stack``,
``kafka_topic``, ``cassandra_keyspace``) can bring these servers up; the test
modules import them by name, so switching means deleting an import line.

A server that already answers its probe is reused and left running; one these
fixtures start is stopped at the end of the session. Each test gets its own topic
or keyspace, removed afterwards.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sluice_dev import artifacts, procs
from sluice_dev.paths import Layout
from sluice_dev.servers import cassandra, kafka, spark
from sluice_dev.servers.base import Server

# How often a condition with a deadline is re-checked.
POLL_SECONDS = 0.25
TOPIC_READY_SECONDS = 30.0


def wait_for(
    check: Callable[[], str | None], *, timeout: float, what: str, interval: float = POLL_SECONDS
) -> None:
    """Poll ``check`` (``None`` = done, else the reason why not) until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        reason = check()
        if reason is None:
            return
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} not reached within {timeout:.0f}s: {reason}")
        time.sleep(interval)


def _log_tail(layout: Layout, name: str, lines: int = 40) -> str:
    try:
        return "\n".join(layout.log(name).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _bring_up(layout: Layout, server: Server, needs: tuple[artifacts.Artifact, ...]) -> int | None:
    """Start ``server`` unless it is already healthy; its pid if started here."""
    if server.probe(layout) is None:
        return None
    for artifact in needs:
        artifacts.ensure(artifact, layout)
    server.prepare(layout)
    pid = procs.spawn(
        server.argv(layout),
        log=layout.log(server.name),
        pidfile=layout.pidfile(server.name),
        env={**os.environ, **procs.marker_env(layout.stack), **server.env(layout)},
    )

    def healthy() -> str | None:
        if not procs.pid_alive(pid):
            pytest.fail(
                f"{server.name} exited during start-up; log {layout.log(server.name)}:\n"
                + _log_tail(layout, server.name)
            )
        return server.probe(layout)

    try:
        wait_for(healthy, timeout=server.start_timeout, what=f"{server.name} healthy")
    except BaseException:
        procs.terminate([pid], grace=server.stop_grace)
        raise
    return pid


@pytest.fixture(scope="session")
def jvm_layout() -> Layout:
    return Layout.from_env()


@pytest.fixture(scope="session")
def kafka_bootstrap(jvm_layout: Layout) -> Iterator[str]:
    """``host:port`` of a healthy local Kafka broker."""
    (server,) = kafka.SERVERS
    pid = _bring_up(jvm_layout, server, kafka.ARTIFACTS)
    yield kafka.BOOTSTRAP
    if pid is not None:
        procs.terminate([pid], grace=server.stop_grace)


@pytest.fixture(scope="session")
def cassandra_contact(jvm_layout: Layout) -> Iterator[tuple[str, int]]:
    """``(host, port)`` of a healthy local Cassandra node's CQL port."""
    (server,) = cassandra.SERVERS
    pid = _bring_up(jvm_layout, server, cassandra.ARTIFACTS)
    host, port = cassandra.CONTACT.rsplit(":", 1)
    yield host, int(port)
    if pid is not None:
        procs.terminate([pid], grace=server.stop_grace)


def _unique(prefix: str, request: pytest.FixtureRequest, sep: str) -> str:
    test = re.sub(r"[^a-z0-9]+", sep, request.node.name.lower()).strip(sep)[:24]
    return f"{prefix}{sep}{test}{sep}{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic(
    kafka_bootstrap: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """A factory: ``kafka_topic(partitions=1)`` creates a fresh topic and returns its
    name once every partition has a leader; the topics are deleted afterwards."""
    # NewTopic is missing from the package's stubs, not from the package.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created: list[str] = []

    def make(partitions: int = 1) -> str:
        name = _unique("t", request, "-") + f"-{len(created)}"
        futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
        futures[name].result(timeout=TOPIC_READY_SECONDS)
        created.append(name)

        def ready() -> str | None:
            topic = admin.list_topics(topic=name, timeout=5).topics.get(name)
            if topic is None or topic.error is not None:
                return f"topic {name}: {topic.error if topic else 'absent'}"
            leaders = [p.leader for p in topic.partitions.values()]
            if len(leaders) != partitions or any(leader < 0 for leader in leaders):
                return f"topic {name} partitions/leaders {leaders}"
            return None

        wait_for(ready, timeout=TOPIC_READY_SECONDS, what=f"topic {name} ready")
        return name

    yield make
    if created:
        for future in admin.delete_topics(created, operation_timeout=30).values():
            future.result(timeout=TOPIC_READY_SECONDS)


@pytest.fixture(scope="session")
def cassandra_session(cassandra_contact: tuple[str, int]) -> Iterator[Any]:
    """A driver session with no retries: a timed-out LWT must never be re-sent."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, FallthroughRetryPolicy

    host, port = cassandra_contact
    profile = ExecutionProfile(
        load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=cassandra.DATACENTER),
        retry_policy=FallthroughRetryPolicy(),
        request_timeout=30,
    )
    cluster = Cluster(
        contact_points=[host],
        port=port,
        protocol_version=5,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
    )
    session = cluster.connect()
    yield session
    cluster.shutdown()


@pytest.fixture
def cassandra_keyspace(cassandra_session: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh keyspace (SimpleStrategy, RF 1), dropped afterwards."""
    name = _unique("t", request, "_")[:48]
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} "
        "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    yield name
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {name}")


@pytest.fixture(scope="session")
def spark_kafka_jars(jvm_layout: Layout) -> list[str]:
    """Paths for ``spark.jars``: Spark's Kafka source and what PySpark lacks of it."""
    for artifact in spark.ARTIFACTS:
        artifacts.ensure(artifact, jvm_layout)
    return [str(path) for path in spark.spark_jars(jvm_layout)]


@pytest.fixture(scope="session")
def spark_session(spark_kafka_jars: list[str]) -> Iterator[Any]:
    """A local[2] SparkSession with the Kafka source, bound to loopback only."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("sluice-stack-tests")
        .config("spark.jars", ",".join(spark_kafka_jars))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield session
    session.stop()
