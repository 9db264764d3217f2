"""The Cassandra sink: rows written from the Spark executors with cassandra-driver.

There is no Spark Cassandra Connector for Spark 4. The output leaves the JVM in
Arrow batches (``mapInArrow``) and each executor partition writes its rows in
unlogged batches grouped by replica set, with bounded concurrency
(``cassandra_writer``). Every cell carries ``USING TIMESTAMP <write version>``:
re-runs of a batch overwrite themselves, and a late write from a fenced driver loses
to the newer one. With ``spec.sink.orderColumn`` the version is each row's own, from
its order value (``sinks.ordered``): the latest event of a key wins. The user owns
the table; the sink checks that it exists and that the DataFrame carries its primary
key, and names what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from cassandra.cluster import Cluster
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job import keys
from sluice_job.cassandra_session import connect
from sluice_job.sinks import SinkSchemaError as SinkSchemaError  # re-exported for callers
from sluice_job.sinks import ordered
from sluice_job.sinks.cassandra_target import CassandraTarget as CassandraTarget
from sluice_job.sinks.cassandra_writer import UUID_TYPES, write_arrow

WRITTEN_SCHEMA = "written long"


class CassandraSink:
    def __init__(self, target: CassandraTarget, order: str | None = None) -> None:
        self.target = target
        self.order = order
        """``spec.sink.orderColumn``: each row's cells carry its own version
        (``sinks.ordered``); ``None``: the batch's."""
        cluster, _ = connect(target.contact_points, target.credentials, target.tls)
        try:
            self.columns, self.key, self.uuids = _table_columns(cluster, target)
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

    def write(self, frame: DataFrame, version: int, *, dry: bool = False) -> int:
        """Write ``frame``'s rows, the later of two with one primary key only
        (``keys``); returns how many were written. ``dry``: the same Spark job, in
        which the executors bind and group the rows but send nothing; returns how
        many would have been written."""
        columns = keys.without_position(frame.columns)
        self.check(columns)
        if self.order is not None:
            frame = ordered.versioned(frame, self.order, version)
            rows = keys.last_per_key(frame, self.key, ordered.VERSION)
            selected = rows.select(*columns, ordered.VERSION)
            write = partial(write_arrow, self.target, columns, None, dry=dry, uuids=self.uuids)
        else:
            selected = keys.last_per_key(frame, self.key).select(*columns)
            write = partial(write_arrow, self.target, columns, version, dry=dry, uuids=self.uuids)
        counts = selected.mapInArrow(write, WRITTEN_SCHEMA)
        written = counts.agg(F.sum("written")).head()
        return int(written[0] or 0) if written is not None else 0


def _table_columns(
    cluster: Cluster, target: CassandraTarget
) -> tuple[set[str], list[str], frozenset[str]]:
    """The table's columns, its primary key, and its uuid and timeuuid columns (Spark
    has no UUID type: the output gives them as strings)."""
    keyspace = cluster.metadata.keyspaces.get(target.keyspace)
    table = keyspace.tables.get(target.table) if keyspace else None
    if table is None:
        raise SinkSchemaError(
            f"sink table {target.keyspace}.{target.table} does not exist: create it first"
        )
    uuids = frozenset(c.name for c in table.columns.values() if c.cql_type in UUID_TYPES)
    return set(table.columns), [c.name for c in table.primary_key], uuids
