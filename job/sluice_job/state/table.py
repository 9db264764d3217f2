"""A state's table in Cassandra: created when missing, widened by a new value column,
refused (with the columns named) when it does not fit the declaration; and the
declared states made ready for the batches (:func:`prepare`).

Runs once at the driver's start, before the first batch, on the checkpoint's
session: the state lives in the checkpoint's cluster and is written under its fence.
"""

from __future__ import annotations

from collections.abc import Sequence

from cassandra.cluster import Session

from sluice_api.event_time import EventTime
from sluice_api.state import State
from sluice_job import logs
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.state.access import StateTarget, migration
from sluice_job.state.handle import States
from sluice_job.state.schema import (
    Existing,
    StateSchema,
    StateSchemaError,
    open_windows_table,
    problems,
)


def prepare(
    session: Session,
    connection: CassandraTarget,
    declared: Sequence[State],
    event_time: EventTime | None,
    owner: str,
) -> States:
    """The declared states, each table ensured (:func:`ensure`) and each ``migrate``
    imported, read and written through ``connection`` (the checkpoint's cluster):
    what a driver does at start, before its first batch. ``owner`` is the pipeline's
    ``namespace/name``."""
    targets = []
    for state in declared:
        schema = StateSchema.of(state, connection.keyspace, owner)
        if schema.migrate:
            migration(schema)  # importable, before any batch
        ensure(session, schema, owner)
        targets.append(StateTarget(connection, schema))
    return States(tuple(targets), 0, event_time)


def ensure(session: Session, schema: StateSchema, owner: str) -> None:
    """``schema``'s table exists and fits it; raises :class:`StateSchemaError` if it
    cannot (another pipeline's table, a changed key or type, a column dropped)."""
    cluster = session.cluster
    existing = _existing(session, schema)
    if existing is None:
        session.execute(schema.create(owner))
        cluster.control_connection.wait_for_schema_agreement()
        logs.event("state table created", state=schema.name, table=schema.where)
        existing = _existing(session, schema)
        if existing is None:
            raise StateSchemaError(f"state {schema.name!r}: table {schema.where} was not created")
    to_add, found = problems(schema, existing, owner)
    if found:
        raise StateSchemaError(
            f"state {schema.name!r} does not fit table {schema.where}: " + "; ".join(found)
        )
    for name in to_add:
        session.execute(schema.add_column(name))
        logs.event(
            "state column added",
            state=schema.name,
            table=schema.where,
            column=name,
            why="declared by this version of the transform; older rows read it as null",
        )
    if to_add:
        cluster.control_connection.wait_for_schema_agreement()
    if schema.indexed:
        session.execute(open_windows_table(schema.keyspace))


def _existing(session: Session, schema: StateSchema) -> Existing | None:
    cluster = session.cluster
    cluster.refresh_table_metadata(schema.keyspace, schema.table)
    keyspace = cluster.metadata.keyspaces.get(schema.keyspace)
    if keyspace is None:
        raise StateSchemaError(
            f"state {schema.name!r}: keyspace {schema.keyspace} does not exist: create it, "
            "or leave transform.state[].keyspace unset (the checkpoint's)"
        )
    table = keyspace.tables.get(schema.table)
    if table is None:
        return None
    return Existing(
        columns={name: column.cql_type for name, column in table.columns.items()},
        partition_key=tuple(c.name for c in table.partition_key),
        clustering_key=tuple(c.name for c in table.clustering_key),
        comment=str(table.options.get("comment") or ""),
    )
