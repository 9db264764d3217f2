"""The executor side of keyed state: one Spark partition's keys read, or its new state
written, against the state's table.

Both run in the Python workers inside the batch's Spark jobs (``mapInArrow``), with
the session and prepared statements the sink's writer caches per worker
(``sinks.cassandra_writer``).

* A *lookup* of batch version ``v`` reads, per key, its newest rows (``LIMIT 3``,
  newest first) and takes the newest below ``v``: the state as the batches before
  this one committed it. Rows this batch wrote in an earlier attempt (a crash,
  a retried task) have version ``v`` and are never read; nor are a fenced driver's,
  which wrote them for the same batch, ranges and version. A row that records a
  deletion reads as no state. A row an older revision of the declaration wrote goes
  through the state's ``migrate`` function first; one a newer revision wrote (code
  rolled back over state it cannot read) fails the batch, naming it.
* A row *above* ``v`` means that batch ``v`` was committed and a later batch wrote
  the key: this driver is fenced and behind, and its successor's write of that
  later batch has deleted the rows it would read. Both the lookup and the write then
  fail the task (:class:`StaleStateError`) instead of computing from an older
  state: a fenced driver's output of a batch is either what its successor wrote for
  it (stable reads, so the same rows, which lose by write version) or nothing.
* A *write* of batch ``v`` reads each key's newest version below ``v`` again and
  sends, as one single-partition batch (atomic on the replica), the key's row at
  ``v`` (``USING TIMESTAMP`` the batch's write version, ``TTL`` the state's) and the
  deletion of its rows below that version: what is left is the row this batch read
  (a re-run reads it again) and the new one. The write version orders two drivers
  executing the same batch by epoch, as the sink's cells are: a zombie's late write
  loses.

Cost per key touched: a lookup reads up to three rows (two, except while a batch is
re-run); a write reads up to three versions and writes one mutation (an INSERT and a
range deletion). A state keyed by one column of a type that reads back equal (text,
the integers, uuids) reads 100 keys per request (``IN ?`` with ``PER PARTITION LIMIT
3``: one coordinator round trip instead of a hundred from the Python worker, whose
per-request work was most of a lookup's time); other keys, one request each. At
most ``concurrency`` requests are in flight per task. A batch's lookup is evaluated
once, however many of its jobs use it (``handle.Kept``).
"""

from __future__ import annotations

import datetime as dt
import importlib
import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import pyarrow as pa
from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType, PreparedStatement
from cassandra.util import Date, OrderedMapSerializedKey, SortedSet

from sluice_api.state import DELETED_COLUMN, REVISION_COLUMN, VERSION_COLUMN
from sluice_job.sinks.arrow_rows import rows
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.sinks.cassandra_writer import UUID_TYPES, _session, with_uuids
from sluice_job.state.schema import (
    OPEN_WINDOWS,
    OPEN_WINDOWS_BUCKETS,
    StateSchema,
    StateSchemaError,
)
from sluice_job.state.tally import Tally, add
from sluice_job.state_io import StateIO

ROWS_READ: Final = 3
"""Rows a read takes per key, newest first: a row of this batch's earlier attempt, the
state before it, and one more (the row before that, which the write deletes)."""
CHUNK: Final = 2_000
"""Keys read (or written) per round of concurrent requests, and rows per Arrow batch
a lookup yields."""
KEYS_PER_READ: Final = 100
"""Keys one read asks for (``IN``, ``PER PARTITION LIMIT``) when the key is one column
of a type that reads back equal to what was bound (:data:`GROUPED_TYPES`)."""
GROUPED_TYPES: Final = frozenset(
    {"text", "ascii", "varchar", "int", "bigint", "smallint", "tinyint", "uuid", "timeuuid"}
)


Row = TypeVar("Row", bound=Sequence[Any])


class DuplicateStateError(ValueError):
    """The transform gave a key two new states in one batch."""


class StaleStateError(RuntimeError):
    """A later batch than this driver's has written the key: the driver is fenced."""


class StateRevisionError(ValueError):
    """A row of state cannot be read in this revision's meaning: a newer revision
    wrote it, or the migration gave something that is not a row of this key."""


@dataclass(frozen=True)
class StateTarget:
    """Everything a task needs to read or write one state; picklable, sent with it."""

    connection: CassandraTarget
    schema: StateSchema

    def select(self) -> str:
        names = ", ".join(f'"{n}"' for n in (*self.schema.key_names, *self.schema.value_names))
        return (
            f'SELECT {names}, "{DELETED_COLUMN}", "{REVISION_COLUMN}", "{VERSION_COLUMN}" '
            f"FROM {self._table()} "
            f"WHERE {self._key()} LIMIT {ROWS_READ}"
        )

    def select_version(self) -> str:
        return (
            f'SELECT "{VERSION_COLUMN}" FROM {self._table()} WHERE {self._key()} LIMIT {ROWS_READ}'
        )

    @property
    def grouped(self) -> bool:
        """Whether reads ask for many keys at once (:data:`KEYS_PER_READ`)."""
        key = self.schema.key
        return len(key) == 1 and key[0][1] in GROUPED_TYPES

    def select_many(self, *, versions: bool) -> str:
        """A read of many keys' newest rows (a grouped target's): the key column first,
        then what :meth:`select` (or, with ``versions``, :meth:`select_version`) reads."""
        (key,) = self.schema.key_names
        names = ", ".join(f'"{n}"' for n in (key, *([] if versions else self.schema.value_names)))
        rest = (
            f'"{VERSION_COLUMN}"'
            if versions
            else (f'"{DELETED_COLUMN}", "{REVISION_COLUMN}", "{VERSION_COLUMN}"')
        )
        return (
            f"SELECT {names}, {rest} FROM {self._table()} "
            f'WHERE "{key}" IN ? PER PARTITION LIMIT {ROWS_READ}'
        )

    def insert(self, values: Sequence[str]) -> str:
        names = [
            *self.schema.key_names,
            VERSION_COLUMN,
            *values,
            DELETED_COLUMN,
            REVISION_COLUMN,
        ]
        columns = ", ".join(f'"{n}"' for n in names)
        marks = ", ".join("?" for _ in names)
        return (
            f"INSERT INTO {self._table()} ({columns}) VALUES ({marks}) USING TIMESTAMP ? AND TTL ?"
        )

    def open_window(self) -> str:
        return (
            f'INSERT INTO "{self.schema.keyspace}".{OPEN_WINDOWS} (owner, state, bucket, '
            "window_start, key) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ? AND TTL ?"
        )

    def open_windows(self) -> str:
        return (
            f'SELECT window_start, key FROM "{self.schema.keyspace}".{OPEN_WINDOWS} '
            "WHERE owner = ? AND state = ? AND bucket = ? AND window_start > ? "
            "AND window_start <= ?"
        )

    def forget_windows(self) -> str:
        return (
            f'DELETE FROM "{self.schema.keyspace}".{OPEN_WINDOWS} USING TIMESTAMP ? '
            "WHERE owner = ? AND state = ? AND bucket = ? AND window_start <= ?"
        )

    def delete_older(self) -> str:
        return (
            f"DELETE FROM {self._table()} USING TIMESTAMP ? "
            f'WHERE {self._key()} AND "{VERSION_COLUMN}" < ?'
        )

    def _table(self) -> str:
        return f'"{self.schema.keyspace}"."{self.schema.table}"'

    def _key(self) -> str:
        return " AND ".join(f'"{n}" = ?' for n in self.schema.key_names)

    @property
    def uuids(self) -> frozenset[str]:
        return frozenset(
            n for n, cql in (*self.schema.key, *self.schema.values) if cql in UUID_TYPES
        )


_prepared: dict[tuple[StateTarget, str], PreparedStatement] = {}


def _statement(session: Session, target: StateTarget, query: str) -> PreparedStatement:
    key = (target, query)
    if key not in _prepared:
        _prepared[key] = session.prepare(query)
    return _prepared[key]


def lookup_arrow(
    target: StateTarget, version: int, tally: Tally | None, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function of a lookup: the partition's keys (the key columns)
    in, the state of those that have one out (key and value columns); the requests'
    seconds and keys added to ``tally``."""
    schema = target.schema
    session = _session(target.connection)
    statement = _statement(session, target, target.select())
    keys = with_uuids(
        (key for batch in batches for key in rows(batch, schema.key_names)),
        schema.key_names,
        target.uuids,
    )
    arrow = schema.arrow_schema()
    names = arrow.names
    read = RowReader(target)
    seconds, count = 0.0, 0
    for chunk in _chunks(keys):
        found = []
        began = time.perf_counter()
        for newest in newest_rows(session, target, statement, chunk, versions=False):
            row = below(schema.name, newest, version, lambda r: int(r[-1]))
            state = None if row is None else read(row[:-1])
            if state is not None:
                found.append(state)
        seconds += time.perf_counter() - began
        count += len(chunk)
        if found:
            columns = list(zip(*found, strict=True))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([_arrow_value(v) for v in column], type=arrow.field(i).type)
                    for i, column in enumerate(columns)
                ],
                names=names,
            )
    add(tally, StateIO(read_seconds=seconds, keys_read=count))


def write_arrow(
    target: StateTarget,
    columns: Sequence[str],
    version: int,
    write_version: int,
    tally: Tally | None,
    batches: Iterable[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function of a state write: the partition's new states in (key
    columns, the value ``columns`` the transform gave and, if it gave it,
    ``sluice_deleted``), the count of keys written out; the requests' seconds and keys
    added to ``tally``. The partition holds every row of its keys (the frame is
    partitioned by key), so a key given twice is found."""
    schema = target.schema
    session = _session(target.connection)
    values = [c for c in columns if c in schema.value_names]
    deleted = DELETED_COLUMN in columns
    windowed = schema.indexed
    names = [
        *schema.key_names,
        *values,
        *([WINDOW_KEY, WINDOW_BUCKET, WINDOW_AT] if windowed else []),
        *([DELETED_COLUMN] if deleted else []),
    ]
    opened = _statement(session, target, target.open_window()) if windowed else None
    insert = _statement(session, target, target.insert(values))
    latest = _statement(session, target, target.select_version())
    delete = _statement(session, target, target.delete_older())
    width = len(schema.key_names)
    seen: set[tuple[Any, ...]] = set()
    written, io = 0, StateIO()
    states = with_uuids(
        (row for batch in batches for row in rows(batch, names)), names, target.uuids
    )
    for chunk in _chunks(states):
        for row in chunk:
            key = tuple(row[:width])
            if key in seen:
                raise DuplicateStateError(
                    f"state {schema.name!r}: the transform gave key {key!r} two new states in "
                    "one batch; give each key of the batch one (aggregate its records first)"
                )
            seen.add(key)
        began = time.perf_counter()
        previous = _latest_versions(session, target, latest, chunk, width, version)
        read = time.perf_counter()
        requests: list[tuple[Any, Any]] = []
        for row, before in zip(chunk, previous, strict=True):
            state = list(row[: width + len(values)])
            gone = bool(row[-1]) if deleted else False
            if opened is not None and not gone:
                key_json, bucket, due = row[width + len(values) : width + len(values) + 3]
                index = (schema.owner, schema.name, int(bucket), due, key_json)
                requests.append((opened, (*index, write_version, schema.ttl_seconds)))
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            batch.add(
                insert,
                (
                    *state[:width],
                    version,
                    *state[width:],
                    gone,
                    schema.revision,
                    write_version,
                    schema.ttl_seconds,
                ),
            )
            if before is not None:
                batch.add(delete, (write_version, *state[:width], before))
            requests.append((batch, None))
        execute_concurrent(
            session, requests, concurrency=target.connection.concurrency, raise_on_first_error=True
        )
        written += len(chunk)
        io += StateIO(read - began, len(chunk), time.perf_counter() - read, len(chunk))
    add(tally, io)
    yield pa.RecordBatch.from_pydict({"written": pa.array([written], pa.int64())})


WINDOW_KEY: Final = "sluice_window_key"
"""A window state's key but the window's start, as JSON: its open-windows index key."""
WINDOW_BUCKET: Final = "sluice_window_bucket"
"""Its partition of the open-windows index (0 .. ``OPEN_WINDOWS_BUCKETS`` - 1)."""
WINDOW_AT: Final = "sluice_window_at"
"""Its time in the index: a window's start, a key's earliest session expiry."""


def open_windows_arrow(
    target: StateTarget, tally: Tally | None, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function that reads the open-windows index: rows of (bucket,
    after, until) in (``after`` and ``until`` in ms, ``after`` null for none), the
    windows that start in ``(after, until]`` out, as (start, key JSON); the reads'
    seconds added to ``tally``."""
    session = _session(target.connection)
    statement = _statement(session, target, target.open_windows())
    schema = target.schema
    seconds = 0.0
    for batch in batches:
        for bucket, after, until in rows(batch, ("bucket", "after", "until")):
            if until is None:
                continue
            low = _time(after) if after is not None else dt.datetime(1, 1, 1, tzinfo=dt.UTC)
            high = _time(until)
            began = time.perf_counter()
            found = list(
                session.execute(statement, (schema.owner, schema.name, int(bucket), low, high))
            )
            seconds += time.perf_counter() - began
            if found:
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(
                            [_arrow_value(r.window_start) for r in found],
                            pa.timestamp("us", tz="UTC"),
                        ),
                        pa.array([r.key for r in found], pa.string()),
                    ],
                    names=["window_start", WINDOW_KEY],
                )
    add(tally, StateIO(read_seconds=seconds))


def forget_windows(target: StateTarget, until_ms: int, write_version: int) -> None:
    """Delete the index's windows that start at or before ``until_ms``: closed, and
    their closing committed."""
    session = _session(target.connection)
    statement = _statement(session, target, target.forget_windows())
    until = _time(until_ms)
    schema = target.schema
    execute_concurrent(
        session,
        [
            (statement, (write_version, schema.owner, schema.name, bucket, until))
            for bucket in range(OPEN_WINDOWS_BUCKETS)
        ],
        concurrency=OPEN_WINDOWS_BUCKETS,
        raise_on_first_error=True,
    )


def _time(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _latest_versions(
    session: Session,
    target: StateTarget,
    statement: PreparedStatement,
    chunk: Sequence[Sequence[Any]],
    width: int,
    version: int,
) -> list[int | None]:
    """Each key's newest version below ``version`` (``None``: it has none)."""
    keys = [row[:width] for row in chunk]
    found: list[int | None] = []
    for newest in newest_rows(session, target, statement, keys, versions=True):
        row = below(target.schema.name, newest, version, lambda r: int(r[0]))
        found.append(None if row is None else int(row[0]))
    return found


def newest_rows(
    session: Session,
    target: StateTarget,
    statement: PreparedStatement,
    keys: Sequence[Sequence[Any]],
    *,
    versions: bool,
) -> list[list[Sequence[Any]]]:
    """Per key of ``keys``, in order, its newest rows (up to :data:`ROWS_READ`, newest
    first) as ``statement`` reads them (:meth:`StateTarget.select`, or with
    ``versions`` :meth:`StateTarget.select_version`): one request per key, or, for a
    grouped target, one per :data:`KEYS_PER_READ` keys (the rows then come with the
    key first, and leave without it)."""
    concurrency = target.connection.concurrency
    if not target.grouped:
        results = execute_concurrent(
            session,
            [(statement, tuple(key)) for key in keys],
            concurrency=concurrency,
            raise_on_first_error=True,
        )
        return [list(result.result_or_exc) for result in results]
    many = _statement(session, target, target.select_many(versions=versions))
    groups = [keys[i : i + KEYS_PER_READ] for i in range(0, len(keys), KEYS_PER_READ)]
    by_key: dict[Any, list[Sequence[Any]]] = {}
    for result in execute_concurrent(
        session,
        [(many, ([key[0] for key in group],)) for group in groups],
        concurrency=concurrency,
        raise_on_first_error=True,
    ):
        for row in result.result_or_exc:
            by_key.setdefault(row[0], []).append(tuple(row[1:]) if versions else tuple(row))
    return [by_key.get(key[0], []) for key in keys]


def below(
    state: str, newest: Sequence[Row], version: int, version_of: Callable[[Row], int]
) -> Row | None:
    """Of a key's newest rows (newest first), the newest below ``version``; raises
    :class:`StaleStateError` if one is above it (a later batch wrote the key)."""
    for row in newest:
        found = version_of(row)
        if found > version:
            raise StaleStateError(
                f"state {state!r}: a key has a row of batch version {found}, after this "
                f"batch's {version}: a newer driver holds the pipeline and has gone past this "
                "batch, so this driver is fenced; its batch stops here, writing nothing of it"
            )
        if found < version:
            return row
    return None


@dataclass
class RowReader:
    """A looked-up row as the lookup gives it: its key and value columns, in this
    revision's meaning (migrated if an older revision wrote it); ``None`` for no state."""

    target: StateTarget

    def __post_init__(self) -> None:
        schema = self.target.schema
        self.names = (*schema.key_names, *schema.value_names)
        self.width = len(schema.key_names)
        self.migrate = migration(schema) if schema.migrate else None

    def __call__(self, row: Sequence[Any]) -> tuple[Any, ...] | None:
        *values, deleted, written_as = row
        if deleted:
            return None
        schema, revision = self.target.schema, int(written_as or 1)
        if revision == schema.revision:
            return tuple(values)
        key = tuple(values[: self.width])
        if revision > schema.revision:
            raise StateRevisionError(
                f"state {schema.name!r}: the row of key {key!r} was written by revision "
                f"{revision}, this transform declares revision {schema.revision}: code older "
                "than the state cannot read it; run the newer version (or migrate the rows "
                "back with CQL)"
            )
        if self.migrate is None:
            raise StateRevisionError(
                f"state {schema.name!r}: the row of key {key!r} was written by revision "
                f"{revision}, and the state declares no migrate function"
            )
        migrated = self.migrate(dict(zip(self.names, values, strict=True)), revision)
        if migrated is None:
            return None
        if (
            not isinstance(migrated, Mapping)
            or tuple(migrated.get(k) for k in schema.key_names) != key
        ):
            raise StateRevisionError(
                f"state {schema.name!r}: {schema.migrate} gave {migrated!r} for the row of key "
                f"{key!r}: it must return a dict with the same key (or None)"
            )
        return tuple(migrated.get(n) for n in self.names)


_migrations: dict[str, Callable[[dict[str, Any], int], Any]] = {}


def migration(schema: StateSchema) -> Callable[[dict[str, Any], int], Any]:
    """The state's ``migrate`` function, imported once per process (the driver checks
    it at start, each Python worker imports it at its first lookup); raises
    :class:`StateSchemaError` naming the field if it names no function."""
    entrypoint = schema.migrate or ""
    if entrypoint not in _migrations:
        module_name, _, name = entrypoint.partition(":")
        field = f"spec.transform.state[{schema.name}].migrate"
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise StateSchemaError(f"{field}: cannot import {module_name!r}: {err}") from None
        function = getattr(module, name, None)
        if not callable(function):
            raise StateSchemaError(f"{field}: {module_name!r} has no function {name!r}")
        _migrations[entrypoint] = function
    return _migrations[entrypoint]


def _chunks(items: Iterable[Any]) -> Iterator[list[Any]]:
    """``items`` in lists of up to :data:`CHUNK`."""
    rest = iter(items)
    return iter(lambda: list(itertools.islice(rest, CHUNK)), [])


def _arrow_value(value: Any) -> Any:
    """A value as cassandra-driver reads it, as ``pa.array`` takes it."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, SortedSet):
        return [_arrow_value(v) for v in value]
    if isinstance(value, OrderedMapSerializedKey | dict):
        return [(_arrow_value(k), _arrow_value(v)) for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [_arrow_value(v) for v in value]
    if isinstance(value, Date):
        return value.date()
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value
