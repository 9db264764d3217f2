"""The Cassandra sink's executor side: one Spark partition's rows into the table.

Rows arrive as Arrow record batches (``arrow_rows``). Each row is bound to the
prepared ``INSERT ... USING TIMESTAMP ?`` with the batch's write version (or, when
the writes are ordered by a column, the row's own: ``ordered``), so every cell
carries it exactly as before: a re-run overwrites itself and a fenced driver's
late write loses. The bound rows are grouped by the nodes that own them
(``cassandra_batches``) into unlogged batches, which the token-aware policy sends to
one of those nodes (a batch takes its routing key from its first row), and at most
``concurrency`` requests are in flight per worker. A batch of one row is sent as
the plain INSERT. The first failed request fails the task, and Spark's retry or the
driver's re-run of the batch writes it again, with the same versions.

A session (and its prepared statements) is opened once per Python worker and reused
by every task that worker runs.
"""

from __future__ import annotations

import atexit
import uuid
from collections.abc import Collection, Hashable, Iterable, Iterator, Sequence
from typing import Any, Final

import pyarrow as pa
from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType, BoundStatement, PreparedStatement

from sluice_job.cassandra_session import connect
from sluice_job.sinks.arrow_rows import rows
from sluice_job.sinks.cassandra_batches import estimated_size, grouped
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.sinks.ordered import VERSION

_sessions: dict[CassandraTarget, Session] = {}
_prepared: dict[tuple[CassandraTarget, tuple[str, ...]], PreparedStatement] = {}


def write_arrow(
    target: CassandraTarget,
    columns: Sequence[str],
    version: int | None,
    batches: Iterable[pa.RecordBatch],
    *,
    dry: bool = False,
    uuids: Collection[str] = (),
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: writes the partition's rows (with ``dry``, only
    prepares their requests, see :func:`write_rows`), then yields one record batch
    with the count written (column ``written``). ``version`` ``None``: each row's
    own is in the batches' ``ordered.VERSION`` column. ``uuids``: the columns whose
    strings are bound as UUIDs (:func:`with_uuids`)."""
    names = [*columns, VERSION] if version is None else columns
    values = with_uuids((row for batch in batches for row in rows(batch, names)), columns, uuids)
    written = write_rows(target, columns, version, values, dry=dry)
    yield pa.RecordBatch.from_pydict({"written": pa.array([written], pa.int64())})


def write_rows(
    target: CassandraTarget,
    columns: Sequence[str],
    version: int | None,
    values: Iterable[Sequence[Any]],
    *,
    dry: bool = False,
) -> int:
    """Write rows (values in ``columns`` order, then, when ``version`` is ``None``,
    the row's own write version); raises on the first failed request,
    else returns how many rows were written. With ``dry`` nothing is sent: the rows
    are bound, grouped by replicas and made into their requests as for a write (the
    session is opened and the statement prepared), which are then dropped; returns
    how many rows would have been written. A standby's warm-up runs the first
    batch's code path so, with rows that must not be written again."""
    session = _session(target)
    statement = _statement(session, target, tuple(columns))
    bound = (statement.bind(row if version is None else (*row, version)) for row in values)
    keyed = ((_replicas(session, target.keyspace, b), estimated_size(b.values), b) for b in bound)
    tally = _Tally()
    requests = ((_request(tally.add(group)), None) for group in grouped(keyed, target.bounds))
    if dry:
        for _ in requests:
            pass  # built, never sent
        return tally.rows
    for _ in execute_concurrent(
        session,
        requests,
        concurrency=target.concurrency,
        raise_on_first_error=True,
        results_generator=True,
    ):
        pass  # a failed request raises here, before the rest are sent
    return tally.rows


UUID_TYPES: Final = ("uuid", "timeuuid")
"""CQL types cassandra-driver takes only ``uuid.UUID`` values for."""


def with_uuids(
    values: Iterable[Sequence[Any]], columns: Sequence[str], uuids: Collection[str]
) -> Iterable[Sequence[Any]]:
    """``values`` with the strings of the ``uuids`` columns made ``uuid.UUID``: Spark has
    no UUID type, so an output gives a uuid or timeuuid column as a string, and the
    driver refuses a string for one ("Got a non-UUID object for a UUID value")."""
    at = [(i, name) for i, name in enumerate(columns) if name in uuids]
    if not at:
        return values
    return (_uuids(row, at) for row in values)


def _uuids(row: Sequence[Any], at: Sequence[tuple[int, str]]) -> list[Any]:
    converted = list(row)
    for i, name in at:
        value = converted[i]
        if isinstance(value, str):
            try:
                converted[i] = uuid.UUID(value)
            except ValueError:
                raise ValueError(
                    f"column {name!r} is a uuid column: {value[:60]!r} is not a UUID"
                ) from None
    return converted


class _Tally:
    """Rows handed to requests so far; all of them are written once every request
    has succeeded."""

    def __init__(self) -> None:
        self.rows = 0

    def add(self, group: list[BoundStatement]) -> list[BoundStatement]:
        self.rows += len(group)
        return group


def _replicas(session: Session, keyspace: str, bound: BoundStatement) -> Hashable:
    """The nodes that own the row, as the driver's token map knows them."""
    return tuple(session.cluster.metadata.get_replicas(keyspace, bound.routing_key))


def _request(group: list[BoundStatement]) -> BoundStatement | BatchStatement:
    if len(group) == 1:
        return group[0]
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    for statement in group:
        batch.add(statement)
    return batch


def _session(target: CassandraTarget) -> Session:
    session = _sessions.get(target)
    if session is None:
        cluster, session = connect(target.contact_points, target.credentials, target.tls)
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
