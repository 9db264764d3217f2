"""The baseline's Cassandra writer: what a Structured Streaming user writes by hand.

The Spark Cassandra Connector has no release for Spark 4, so a user of Structured
Streaming writes the rows from ``foreachBatch`` with cassandra-driver, the way the
driver's documentation and most answers show it:

* ``frame.rdd.foreachPartition`` over the batch's ``Row`` objects;
* one session per Python worker, opened with a plain ``Cluster(...).connect()`` on
  first use and cached in a module global (Spark reuses its Python workers, so later
  tasks find it), the prepared statement cached beside it;
* one prepared ``INSERT ... USING TIMESTAMP ?`` per row, sent with
  ``cassandra.concurrent.execute_concurrent_with_args(..., concurrency=64)``, which
  raises on the first failed row (Spark's task retry writes the partition again).

Nothing of Sluice's sink is used here (no Arrow transfer, no batches grouped by
replica set): this is the writer the benchmark's baseline is meant to have.
"""

from __future__ import annotations

import atexit
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from cassandra.cluster import Cluster, Session
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import PreparedStatement
from pyspark.sql import DataFrame

CONCURRENCY: Final = 64

_session: Session | None = None
_statements: dict[str, PreparedStatement] = {}


@dataclass(frozen=True)
class Destination:
    """Where the rows go: ``host:port`` contact points, keyspace and table."""

    contact_points: tuple[str, ...]
    keyspace: str
    table: str

    def insert(self, columns: Iterable[str]) -> str:
        names = list(columns)
        marks = ", ".join("?" for _ in names)
        return (
            f"INSERT INTO {self.keyspace}.{self.table} ({', '.join(names)}) "
            f"VALUES ({marks}) USING TIMESTAMP ?"
        )


def connect(destination: Destination) -> Session:
    """The worker's session (opened on first use, cached for later tasks)."""
    global _session
    if _session is None:
        points = [point.partition(":") for point in destination.contact_points]
        port = int(points[0][2] or 9042)  # one port for all, as Cluster takes it
        cluster = Cluster(contact_points=[host for host, _, _ in points], port=port)
        _session = cluster.connect()
        atexit.register(cluster.shutdown)
    return _session


def prepared(session: Session, cql: str) -> PreparedStatement:
    """The worker's prepared statement for ``cql`` (prepared on first use)."""
    statement = _statements.get(cql)
    if statement is None:
        statement = _statements[cql] = session.prepare(cql)
    return statement


def write_partition(
    destination: Destination, columns: tuple[str, ...], timestamp: int, rows: Iterable[Any]
) -> None:
    """``foreachPartition``'s function: every row, one INSERT each, 64 in flight."""
    session = connect(destination)
    statement = prepared(session, destination.insert(columns))
    parameters = ((*row, timestamp) for row in rows)
    execute_concurrent_with_args(session, statement, parameters, concurrency=CONCURRENCY)


def write(frame: DataFrame, destination: Destination, timestamp: int) -> None:
    """Writes the batch's rows, each cell ``USING TIMESTAMP timestamp``."""
    columns = tuple(frame.columns)
    frame.rdd.foreachPartition(partial(write_partition, destination, columns, timestamp))
