"""Eager migration of a state: every row an older revision wrote, rewritten in this
revision's meaning (``python -m sluice_job --migrate-state NAME``).

Lookups migrate lazily: each read of a row an older revision wrote goes through the
state's ``migrate`` function. This command does the same once, for the whole table,
so that the functions can be retired and the table read with CQL in one meaning.

Each row of a committed batch is rewritten **in place**: same key, same
``sluice_version``, its values as ``migrate`` gives them (a row it gives ``None`` for
becomes a deletion), the declaration's revision, its remaining TTL, and a write time
one microsecond after the row's own. A lookup of any batch then reads exactly what
it read before, through the function, so the command may run while the pipeline runs
(with the new version deployed, and a pure ``migrate``): a row the pipeline writes or
deletes meanwhile belongs to a later batch, whose write version is past the rewrite's
(``write_order``), and the rewrite never resurrects it. Rows above the checkpoint's
last committed batch version are left alone: the batch in flight, whose re-run by the
next epoch writes its rows at exactly the original's write time plus one (a tie).
Rows a newer revision wrote are refused, naming them: code older than the state
cannot read them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent
from cassandra.query import SimpleStatement

from sluice_api import env as env_names
from sluice_api.state import DELETED_COLUMN, REVISION_COLUMN, VERSION_COLUMN
from sluice_job.cassandra_session import Credentials, connect
from sluice_job.config import DriverConfig
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.state import table as state_table
from sluice_job.state.access import RowReader, StateRevisionError, StateTarget
from sluice_job.state.schema import StateSchemaError
from sluice_job.tls import TlsMaterial

__all__ = ["Migrated", "StateRevisionError", "StateSchemaError", "command", "migrate_table"]

PAGE = 1_000
"""Rows fetched per page of the scan (and rewritten per round of requests)."""


@dataclass(frozen=True)
class Migrated:
    """What an eager migration did to one state's table."""

    state: str
    rows: int
    """Rows read."""
    rewritten: int
    """Rows an older revision wrote, now in this revision's meaning."""
    deleted: int
    """Of those, the rows ``migrate`` gave ``None`` for: rewritten as deletions."""
    in_flight: int = 0
    """Rows of older revisions above the last committed batch, left alone."""


def command(cfg: DriverConfig, name: str, env: Mapping[str, str]) -> Migrated:
    """Migrate the pipeline's state ``name`` as ``cfg`` declares it (the new version's
    spec), through the checkpoint's cluster, credentials and TLS, as the driver
    reaches it: its table is checked (and widened) as at a driver's start first."""
    declared = [s for s in cfg.spec.transform.state if s.name == name]
    if not declared:
        names = [s.name for s in cfg.spec.transform.state]
        raise StateSchemaError(
            f"--migrate-state {name!r}: spec.transform.state declares no such state ({names})"
        )
    checkpoint = cfg.spec.checkpoint.cassandra
    credentials = Credentials.from_env(env, env_names.CHECKPOINT_CASSANDRA_CREDENTIALS)
    tls = TlsMaterial.from_env(checkpoint.tls, env, env_names.CHECKPOINT_CASSANDRA_CREDENTIALS)
    cluster, session = connect(checkpoint.contact_points, credentials, tls)
    try:
        connection = CassandraTarget(
            tuple(checkpoint.contact_points), checkpoint.keyspace, "", credentials, tls=tls
        )
        owner = f"{cfg.namespace}/{cfg.pipeline}"
        states = state_table.prepare(
            session, connection, declared, cfg.spec.transform.event_time, owner
        )
        found = session.execute(
            f'SELECT write_version FROM "{checkpoint.keyspace}".checkpoints WHERE pipeline = %s',
            (cfg.checkpoint_key,),
        ).one()
        committed = int(found.write_version or 0) if found else 0
        return migrate_table(session, states[name].target, committed)
    finally:
        cluster.shutdown()


def migrate_table(session: Session, target: StateTarget, committed: int) -> Migrated:
    """Rewrite ``target``'s rows of older revisions up to batch version ``committed``
    (the checkpoint's last committed batch; see the module's docstring)."""
    schema = target.schema
    if not schema.migrate:
        raise StateRevisionError(
            f"state {schema.name!r} declares no migrate function: nothing to migrate with"
        )
    read = RowReader(target)
    insert = session.prepare(target.insert(list(schema.value_names)))
    rows = rewritten = deleted = in_flight = 0
    for page in _pages(session, target):
        requests: list[tuple[Any, tuple[Any, ...]]] = []
        for row in page:
            rows += 1
            key = tuple(row[: len(schema.key_names)])
            version, values, gone, revision, written, ttl = _parts(row, len(key))
            if gone or int(revision or 1) == schema.revision:
                continue
            if version > committed:
                in_flight += 1
                continue
            state = read((*key, *values, gone, revision))
            rewritten += 1
            deleted += state is None
            now = (None,) * len(values) if state is None else state[len(key) :]
            parameters = (*key, version, *now, state is None, schema.revision)
            requests.append((insert, (*parameters, written + 1, int(ttl or 0))))
        execute_concurrent(
            session,
            requests,
            concurrency=target.connection.concurrency,
            raise_on_first_error=True,
        )
    return Migrated(schema.name, rows, rewritten, deleted, in_flight)


def _pages(session: Session, target: StateTarget) -> Iterator[list[Any]]:
    schema = target.schema
    names = ", ".join(f'"{n}"' for n in (*schema.key_names, VERSION_COLUMN, *schema.value_names))
    query = SimpleStatement(
        f'SELECT {names}, "{DELETED_COLUMN}", "{REVISION_COLUMN}", '
        f'WRITETIME("{DELETED_COLUMN}"), TTL("{DELETED_COLUMN}") '
        f'FROM "{schema.keyspace}"."{schema.table}"',
        fetch_size=PAGE,
    )
    result = session.execute(query)
    page: list[Any] = []
    for row in result:
        page.append(tuple(row))
        if len(page) == PAGE:
            yield page
            page = []
    if page:
        yield page


def _parts(row: tuple[Any, ...], width: int) -> tuple[int, tuple[Any, ...], bool, Any, int, Any]:
    """A scanned row's version, values, deletion mark, revision, write time and TTL."""
    version, *rest = row[width:]
    *values, gone, revision, written, ttl = rest
    return int(version), tuple(values), bool(gone), revision, int(written), ttl
