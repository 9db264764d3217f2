"""What the benchmark needs from the local stack: servers up, Spark's Kafka jars,
fresh topics and a fresh keyspace with one sink table per contender and phase (and
one for the ceiling), and a quiet Cassandra before each timed phase.

Servers already up are reused and never stopped (other runs share the stack's
ports); servers that are down are started and left running, like
``sluice-dev up kafka cassandra``. Topics and the keyspace carry a per-run name and
are deleted at the end unless asked to keep them.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from cassandra.cluster import Cluster, Session

# NewTopic is missing from the package's stubs, not from the package.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from sluice_dev import ports
from sluice_dev import stack as local_stack
from sluice_dev.paths import Layout
from sluice_dev.servers import kafka, kube, nodeagent
from sluice_dev.servers import spark as spark_artifact
from sluice_job.cassandra_session import connect

SERVERS: Final = ("kafka", "cassandra")
OPERATOR_SERVERS: Final = (
    *SERVERS,
    kube.APISERVER,
    kube.CONTROLLER_MANAGER,
    kube.SCHEDULER,
    nodeagent.NAME,
)
"""What a bench running pipelines under the operator needs: the stores, the control
plane and the node agent."""

EVENTS_TABLE: Final = """CREATE TABLE {keyspace}.{table} (event_id text PRIMARY KEY,
    seq bigint, page text, action text, user_id text, event_time timestamp,
    source_topic text, source_partition int, source_offset bigint)"""
"""The target table of ``sluice_job.examples.events`` (see its docstring)."""
BACKLOG_SEED: Final = 7
"""The ``EventFactory`` seed of the throughput phase's backlog (and the ceiling's rows)."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class Names:
    """Per-run names: a stamp for files, and the topic and keyspace prefix."""

    stamp: str
    run: str

    @classmethod
    def fresh(cls) -> Names:
        now = datetime.now(UTC)
        return cls(now.strftime("%Y%m%dT%H%M%SZ"), f"{now:%m%d%H%M}{uuid.uuid4().hex[:6]}")

    @property
    def keyspace(self) -> str:
        return f"bench_{self.run}"

    def topic(self, role: str) -> str:
        return f"bench-{self.run}-{role}"


def ensure_stack(layout: Layout, say: Say, servers: Sequence[str] = SERVERS) -> str:
    """Kafka and Cassandra (or ``servers``) healthy (started if down, never stopped);
    the Spark jars provisioned. Returns the jars as ``spark.jars`` wants them."""
    wanted = local_stack.with_requirements(servers)
    down = [s.name for s in wanted if not local_stack.health(s, layout).healthy]
    if down:
        say(f"starting {', '.join(down)} (left running afterwards)")
        local_stack.up(layout, down, say=say)
    local_stack.provision(layout, [spark_artifact.NAME], say=lambda _line: None)
    return ",".join(str(jar) for jar in spark_artifact.spark_jars(layout))


BOOTSTRAP: Final = kafka.BOOTSTRAP
CONTACT: Final = f"{ports.HOST}:{ports.CASSANDRA_NATIVE}"


class Topics:
    """Creates topics (each with a leader per partition before use); deletes them."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.created: list[str] = []

    def create(self, name: str, partitions: int) -> str:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1)
        self.admin.create_topics([topic], operation_timeout=30)[name].result(timeout=60)
        self.created.append(name)
        deadline = time.monotonic() + 60
        while not self._ready(name, partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name}: no leader for every partition after 60s")
            time.sleep(0.2)
        return name

    def _ready(self, name: str, partitions: int) -> bool:
        found = self.admin.list_topics(topic=name, timeout=10).topics.get(name)
        if found is None or found.error is not None:
            return False
        leaders = [p.leader for p in found.partitions.values()]
        return len(leaders) == partitions and all(leader >= 0 for leader in leaders)

    def delete_all(self) -> None:
        if self.created:
            for future in self.admin.delete_topics(self.created, operation_timeout=30).values():
                future.result(timeout=60)
            self.created.clear()


@contextmanager
def cassandra_session(contact: str) -> Iterator[Session]:
    cluster: Cluster
    cluster, session = connect([contact], None, timeout=30)
    try:
        yield session
    finally:
        cluster.shutdown()


def create_keyspace(session: Session, keyspace: str, tables: Sequence[str]) -> None:
    session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}",
        timeout=120,
    )
    for table in tables:
        session.execute(EVENTS_TABLE.format(keyspace=keyspace, table=table), timeout=120)


def drop_keyspace(session: Session, keyspace: str) -> None:
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


BUSY_POOLS: Final = ("CompactionExecutor", "MemtableFlushWriter", "MemtablePostFlush")
"""Cassandra's thread pools whose work competes with the writes being timed."""


def quiesce(session: Session, timeout: float) -> float:
    """Waits (at most ``timeout`` seconds) until Cassandra has no flush or compaction
    running or pending (``system_views.thread_pools``), so a timed phase does not pay
    for the writes of the one before; returns the seconds waited."""
    began = time.monotonic()
    query = "SELECT active_tasks, pending_tasks FROM system_views.thread_pools WHERE name = %s"
    while time.monotonic() - began < timeout:
        busy = 0
        for pool in BUSY_POOLS:
            row: Any = session.execute(query, (pool,), timeout=30).one()
            if row is not None:
                busy += int(row.active_tasks) + int(row.pending_tasks)
        if not busy:
            break
        time.sleep(1.0)
    return time.monotonic() - began


COUNT_SLICES = 64
"""Token-range slices of a row count: each slice is one short query, so counting a
million rows on a busy node stays inside the server's range-read timeout (10 s)."""


def count_rows(session: Session, keyspace: str, table: str) -> int:
    """Rows in a sink table (a full scan: run outside any timed window). Slices are
    ``(a, b]``: Murmur3 never assigns the minimum token, so none is left out."""
    metadata = session.cluster.metadata.keyspaces[keyspace].tables[table]
    key = ", ".join(f'"{c.name}"' for c in metadata.partition_key)
    query = session.prepare(
        f"SELECT COUNT(*) FROM {keyspace}.{table} WHERE token({key}) > ? AND token({key}) <= ?"
    )
    low, high = -(2**63), 2**63 - 1
    step = (high - low) // COUNT_SLICES
    bounds = [low + i * step for i in range(COUNT_SLICES)] + [high]
    total = 0
    for start, end in itertools.pairwise(bounds):
        row: Any = session.execute(query, (start, end), timeout=120).one()
        total += int(row[0])
    return total
