"""The Cassandra sink: rows written from the Spark executors with cassandra-driver.

There is no Spark Cassandra Connector for Spark 4, so each executor partition opens
(once per Python worker, then reused) a session and runs a prepared INSERT with
bounded concurrency. Every cell carries ``USING TIMESTAMP <write version>``: re-runs
of a batch overwrite themselves, and a late write from a fenced driver loses to the
newer one. The user owns the table; the sink checks that it exists and that the
DataFrame carries its primary key, and names what is missing.
"""

from __future__ import annotations

import atexit
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.cluster import Cluster, Session
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import PreparedStatement
from pyspark.sql import DataFrame, Row

from sluice_job import keys
from sluice_job.cassandra_session import Credentials, connect
from sluice_job.sinks import SinkSchemaError as SinkSchemaError  # re-exported for callers


@dataclass(frozen=True)
class CassandraTarget:
    """Everything an executor needs to write; picklable, sent with the task."""

    contact_points: tuple[str, ...]
    keyspace: str
    table: str
    credentials: Credentials | None
    concurrency: int = 64

    def insert(self, columns: Sequence[str]) -> str:
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" for _ in columns)
        return (
            f'INSERT INTO "{self.keyspace}"."{self.table}" ({names}) VALUES ({marks}) '
            "USING TIMESTAMP ?"
        )


class CassandraSink:
    def __init__(self, target: CassandraTarget) -> None:
        self.target = target
        cluster, _ = connect(target.contact_points, target.credentials)
        try:
            self.columns, self.key = _table_columns(cluster, target)
        finally:
            cluster.shutdown()

    def check(self, columns: Sequence[str]) -> None:
        where = f"{self.target.keyspace}.{self.target.table}"
        unknown = [c for c in columns if c not in self.columns]
        if unknown:
            raise SinkSchemaError(f"sink table {where} has no column(s) {unknown}")
        missing = [c for c in self.key if c not in columns]
        if missing:
            raise SinkSchemaError(
                f"transform output lacks primary key column(s) {missing} of {where}"
            )

    def write(self, frame: DataFrame, version: int) -> int:
        """Write ``frame``'s rows, the later of two with one primary key only
        (``keys``); returns how many were written."""
        columns = keys.without_position(frame.columns)
        self.check(columns)
        target = self.target
        written = (
            keys.last_per_key(frame, self.key)
            .rdd.mapPartitions(lambda rows: [write_rows(target, columns, version, rows)])
            .sum()
        )
        return int(written)


def _table_columns(cluster: Cluster, target: CassandraTarget) -> tuple[set[str], list[str]]:
    keyspace = cluster.metadata.keyspaces.get(target.keyspace)
    table = keyspace.tables.get(target.table) if keyspace else None
    if table is None:
        raise SinkSchemaError(
            f"sink table {target.keyspace}.{target.table} does not exist: create it first"
        )
    return set(table.columns), [c.name for c in table.primary_key]


# -- executor side ----------------------------------------------------------------

_sessions: dict[CassandraTarget, Session] = {}
_prepared: dict[tuple[CassandraTarget, tuple[str, ...]], PreparedStatement] = {}


def write_rows(
    target: CassandraTarget, columns: Sequence[str], version: int, rows: Iterable[Row]
) -> int:
    """Write one Spark partition's rows; raises on the first failed write, else
    returns how many were written."""
    session = _session(target)
    statement = _statement(session, target, tuple(columns))
    params: Iterator[tuple[Any, ...]] = ((*(row[c] for c in columns), version) for row in rows)
    results = execute_concurrent_with_args(
        session,
        statement,
        params,
        concurrency=target.concurrency,
        raise_on_first_error=True,
        results_generator=True,
    )
    return sum(1 for _ in results)


def _session(target: CassandraTarget) -> Session:
    session = _sessions.get(target)
    if session is None:
        cluster, session = connect(target.contact_points, target.credentials)
        atexit.register(cluster.shutdown)
        _sessions[target] = session
    return session


def _statement(
    session: Session, target: CassandraTarget, columns: tuple[str, ...]
) -> PreparedStatement:
    key = (target, columns)
    if key not in _prepared:
        _prepared[key] = session.prepare(target.insert(columns))
    return _prepared[key]
