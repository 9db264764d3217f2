"""A declared state's table, as CQL and as Spark sees it, and how it compares with the
table Cassandra has: purely computational.

A state table is ``PRIMARY KEY ((key...), sluice_version)``, newest version first:
one row per key and batch version, so a batch reads the state the batches before it
committed (the newest row below its own version) and never its own partial write.
``sluice_deleted`` marks a row that records the key's deletion, ``sluice_revision``
the declaration's revision the row was written under (``access`` migrates a row of an
older revision when it reads it).

What a declaration may change against the table it finds (``problems``): a value
column the table lacks is added (it reads null in the rows written before it); a
column whose type differs, a key that differs, or a column of the table the
declaration no longer names are refused, naming the columns, before anything is read:
a state is never half-read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from sluice_api.state import (
    DELETED_COLUMN,
    REVISION_COLUMN,
    SESSIONS_COLUMN,
    VERSION_COLUMN,
    State,
)
from sluice_job.cql_table import CqlSchemaError, CqlType, parse_type

OWNER_COMMENT: Final = "sluice state {name} of pipeline {owner}"
"""The table's comment: which pipeline's state it is."""


class StateSchemaError(ValueError):
    """A state declaration does not fit its table (or Cassandra's types); the message
    names the state and the columns."""


@dataclass(frozen=True)
class Window:
    """A window state's windows: the key column of their start, size and slide (s)."""

    start: str
    size_seconds: int
    slide_seconds: int


@dataclass(frozen=True)
class Session:
    """A session state's inactivity gap (s)."""

    gap_seconds: int


def session_type(cql: str) -> str:
    """The table's type of a session state's value column declared ``cql``: a map
    from each open session's start to its value (a collection is frozen in it)."""
    collection = parse_type(cql).name in ("list", "set", "map")
    return f"map<timestamp,{f'frozen<{cql}>' if collection else cql}>"


OPEN_WINDOWS: Final = "sluice_open_windows"
"""The table, in a window or session state's keyspace, that lists each open window's
key by the window's start, or each key's open sessions by the earliest expiry among
them (``windows``, ``sessions``): what a batch reads to close the windows and
sessions the watermark passed whose keys it did not touch."""
OPEN_WINDOWS_BUCKETS: Final = 16
"""Partitions per state of the open-windows index (a key's is a hash of it)."""


def open_windows_table(keyspace: str) -> str:
    return (
        f'CREATE TABLE IF NOT EXISTS "{keyspace}".{OPEN_WINDOWS} (owner text, state text, '
        "bucket int, window_start timestamp, key text, "
        "PRIMARY KEY ((owner, state, bucket), window_start, key)) "
        "WITH comment = 'sluice: the open windows of window states, by start'"
    )


@dataclass(frozen=True)
class StateSchema:
    """One declared state, resolved: where its table is, its key and value columns
    with their CQL types (lower-case names, in declaration order) and its TTL."""

    name: str
    keyspace: str
    table: str
    key: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, str], ...]
    ttl_seconds: int
    revision: int = 1
    migrate: str | None = None
    """``module:function`` that brings a row of an older revision to this one."""
    window: Window | None = None
    owner: str = ""
    """``namespace/name`` of the pipeline: its rows of the open-windows index."""
    session: Session | None = None

    @classmethod
    def of(cls, state: State, checkpoint_keyspace: str, owner: str = "") -> StateSchema:
        types = state.column_types()
        key = tuple((c.name.lower(), types[c.name.lower()]) for c in state.key)
        values = tuple((c.name.lower(), types[c.name.lower()]) for c in state.columns)
        if state.session is not None:
            sessions = ((SESSIONS_COLUMN, "map<timestamp,timestamp>"),)
            values = (*sessions, *((name, session_type(cql)) for name, cql in values))
        schema = cls(
            state.name,
            state.keyspace or checkpoint_keyspace,
            state.table.lower(),
            key,
            values,
            state.ttl_seconds,
            state.revision,
            state.migrate,
            None
            if state.window is None
            else Window(state.window.start.lower(), state.window.size_seconds, state.window.slide),
            owner,
            None if state.session is None else Session(state.session.gap_seconds),
        )
        schema.spark_schema()  # refuses a type no Spark column carries
        return schema

    @property
    def where(self) -> str:
        return f"{self.keyspace}.{self.table}"

    @property
    def indexed(self) -> bool:
        """Whether the state's open windows or sessions are in the open-windows index."""
        return self.window is not None or self.session is not None

    @property
    def window_key(self) -> tuple[str, ...]:
        """The index key: a window state's key columns but the window's start, a
        session state's key columns."""
        if self.window is not None:
            return tuple(n for n in self.key_names if n != self.window.start)
        return self.key_names if self.session is not None else ()

    @property
    def index_lag_ms(self) -> int:
        """How far an index entry's time is behind the watermark that closes it: a
        window's start a size before it, a session's expiry at it."""
        return self.window.size_seconds * 1000 if self.window is not None else 0

    def closed_before(self, watermark_ms: int) -> int:
        """The index time (ms) at or before which every entry is closed once the
        watermark is ``watermark_ms``."""
        return watermark_ms - self.index_lag_ms

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.key)

    @property
    def value_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.values)

    def columns(self) -> dict[str, str]:
        """Every column the table holds for this declaration, and its CQL type."""
        return {
            **dict(self.key),
            VERSION_COLUMN: "bigint",
            **dict(self.values),
            DELETED_COLUMN: "boolean",
            REVISION_COLUMN: "int",
        }

    def spark_schema(self) -> T.StructType:
        """The Spark schema of a lookup's rows: the key and value columns."""
        fields = []
        for name, cql in (*self.key, *self.values):
            fields.append(T.StructField(name, _spark(self.name, name, cql), nullable=True))
        return T.StructType(fields)

    def spark_types(self, names: Iterable[str]) -> T.StructType:
        """The Spark schema of the columns ``names`` (key or value columns), in order."""
        fields = {f.name: f for f in self.spark_schema().fields}
        return T.StructType([fields[n] for n in names])

    def arrow_schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC"))
                for f in self.spark_schema().fields
            ]
        )

    def create(self, owner: str) -> str:
        """The table's ``CREATE TABLE IF NOT EXISTS``."""
        columns = ", ".join(f'"{name}" {cql}' for name, cql in self.columns().items())
        keys = ", ".join(f'"{name}"' for name in self.key_names)
        comment = OWNER_COMMENT.format(name=self.name, owner=owner).replace("'", "''")
        return (
            f'CREATE TABLE IF NOT EXISTS "{self.keyspace}"."{self.table}" ({columns}, '
            f'PRIMARY KEY (({keys}), "{VERSION_COLUMN}")) '
            f'WITH CLUSTERING ORDER BY ("{VERSION_COLUMN}" DESC) '
            f"AND comment = '{comment}'"
        )

    def add_column(self, name: str) -> str:
        return f'ALTER TABLE "{self.keyspace}"."{self.table}" ADD "{name}" {self.columns()[name]}'


@dataclass(frozen=True)
class Existing:
    """A table as Cassandra's metadata describes it."""

    columns: Mapping[str, str]
    """Column name to CQL type, as the driver's metadata prints it."""
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...]
    comment: str


def problems(schema: StateSchema, table: Existing, owner: str) -> tuple[list[str], list[str]]:
    """What to add to ``table`` for ``schema`` (value columns it lacks), and why it does
    not fit (empty when it does)."""
    found: list[str] = []
    expected_comment = OWNER_COMMENT.format(name=schema.name, owner=owner)
    if table.comment != expected_comment:
        found.append(
            f"its comment is {table.comment!r}, not {expected_comment!r}: it is not this "
            "pipeline's state (another pipeline's, or a table of the user's)"
        )
    if table.partition_key != schema.key_names:
        found.append(
            f"its partition key is {list(table.partition_key)}, the declared key "
            f"{list(schema.key_names)}"
        )
    if table.clustering_key != (VERSION_COLUMN,):
        found.append(f"its clustering key is {list(table.clustering_key)}, not [{VERSION_COLUMN}]")
    declared = schema.columns()
    for name, cql in declared.items():
        have = table.columns.get(name)
        if have is not None and _canonical(have) != _canonical(cql):
            found.append(f"column {name} is {have} in the table, declared {cql}")
    extra = sorted(set(table.columns) - set(declared))
    if extra:
        found.append(
            f"the table has column(s) {extra} the state no longer declares: declare them "
            "again (a migration reads them) or drop them from the table with CQL"
        )
    to_add = [name for name in declared if name not in table.columns]
    missing_key = [name for name in to_add if name in schema.key_names or name == VERSION_COLUMN]
    if missing_key:
        found.append(f"the table lacks key column(s) {missing_key}")
    return [n for n in to_add if n not in missing_key], found


def _canonical(cql: str) -> str:
    try:
        return str(parse_type(cql))
    except CqlSchemaError:
        return cql.replace(" ", "").lower()


SPARK_SCALARS: Final[Mapping[str, T.DataType]] = {
    "ascii": T.StringType(),
    "text": T.StringType(),
    "varchar": T.StringType(),
    "tinyint": T.ByteType(),
    "smallint": T.ShortType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "varint": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "decimal": T.DecimalType(38, 18),
    "boolean": T.BooleanType(),
    "timestamp": T.TimestampType(),
    "date": T.DateType(),
    "blob": T.BinaryType(),
    "uuid": T.StringType(),
    "timeuuid": T.StringType(),
}
"""The Spark type a lookup gives each scalar CQL type (what the sink takes for it)."""


def spark_of(cql: CqlType) -> T.DataType | None:
    """The Spark type of a state column of ``cql``; ``None`` if none carries it."""
    if cql.name in ("list", "set"):
        element = spark_of(cql.args[0])
        return None if element is None else T.ArrayType(element, containsNull=True)
    if cql.name == "map":
        key, value = spark_of(cql.args[0]), spark_of(cql.args[1])
        if key is None or value is None:
            return None
        return T.MapType(key, value, valueContainsNull=True)
    return SPARK_SCALARS.get(cql.name)


def _spark(state: str, column: str, cql_text: str) -> T.DataType:
    try:
        cql = parse_type(cql_text)
    except CqlSchemaError as err:
        raise StateSchemaError(f"state {state!r}, column {column!r}: {err}") from None
    found = spark_of(cql)
    if found is None:
        raise StateSchemaError(
            f"state {state!r}, column {column!r}: the CQL type {cql_text!r} is not one a state "
            "column takes (scalars and list, set, map of them; not counter)"
        )
    return found
