"""How a row of the transform's output becomes a Datastore entity (pure, no I/O).

The key contract: the output has a column ``__key__`` (Datastore's own name for an
entity's key) that names each entity of the sink's kind; every other column becomes
a property of the same name, and ``__key__`` itself is not stored as a property.

* ``__key__`` of a string type: the key *name* (non-empty, at most 1500 bytes, not
  of the reserved form ``__*__``);
* of an integral type: the key's numeric *id* (positive);
* a struct (``F.struct("page", "window_start")``): a composite key, its *name* the
  compact JSON array of the parts in field order, e.g. ``["/home","2025-11-22T03:00:00+00:00"]``;
  parts may be strings, integers, booleans, decimals, dates and timestamps (UTC).

A null key (or key part) fails the batch naming the column: the key is what makes a
re-run overwrite itself, there is no deterministic stand-in for it.

Values: Spark timestamps become UTC timestamps (PySpark hands them over as naive
local times, NTZ timestamps as naive UTC), dates midnight UTC, decimals strings
(Datastore has no decimal and a double would round), binary blobs, arrays arrays,
structs and maps embedded entities. Strings and blobs over 1500 bytes, embedded
entities and the sink's own version property are excluded from indexes, as
Datastore requires or as nobody queries them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any, Final

from google.cloud.datastore import Entity
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegralType,
    MapType,
    NullType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

from sluice_job.sinks import SinkSchemaError

KEY_COLUMN: Final = "__key__"
VERSION_PROPERTY: Final = "_sluice_version"
MAX_INDEXED_BYTES: Final = 1500
MAX_KEY_NAME_BYTES: Final = 1500

Convert = Callable[[Any], Any]
Ident = int | str


class BadKeyError(ValueError):
    """A row's key is null, empty, reserved or too long; names the column."""


@dataclass(frozen=True)
class EntityShape:
    """Where a row's key and properties are, and how to convert them; built once per
    batch on the driver from the output's schema, then shipped to the executors."""

    key_index: int
    key: Callable[[Any], Ident]
    properties: tuple[tuple[str, int, Convert], ...]

    def ident(self, row: Sequence[Any]) -> Ident:
        return self.key(row[self.key_index])

    def values(self, row: Sequence[Any]) -> dict[str, Any]:
        return {name: convert(row[index]) for name, index, convert in self.properties}


def shape(schema: StructType) -> EntityShape:
    """The shape of the output's entities; raises :class:`SinkSchemaError` naming the
    column when the output breaks the key contract or holds an unstorable type."""
    names = schema.names
    if KEY_COLUMN not in names:
        raise SinkSchemaError(
            f"transform output has no {KEY_COLUMN!r} column naming each Datastore entity; "
            f"add one, e.g. F.col('event_id').alias('{KEY_COLUMN}'), "
            f"or F.struct(...).alias('{KEY_COLUMN}') for a composite key"
        )
    properties = []
    for index, field in enumerate(schema.fields):
        if field.name == KEY_COLUMN:
            continue
        _check_property_name(field.name)
        properties.append((field.name, index, converter(field.dataType, field.name)))
    key_index = names.index(KEY_COLUMN)
    return EntityShape(
        key_index, key_converter(schema.fields[key_index].dataType), tuple(properties)
    )


def _check_property_name(name: str) -> None:
    if name == VERSION_PROPERTY:
        raise SinkSchemaError(f"column {name!r} is reserved: the sink stores the write version")
    if not name or (name.startswith("__") and name.endswith("__")):
        raise SinkSchemaError(f"column {name!r}: Datastore reserves property names like __x__")
    if len(name.encode()) > MAX_KEY_NAME_BYTES:
        raise SinkSchemaError(f"column {name[:40]!r}... is longer than 1500 bytes")


# -- keys --------------------------------------------------------------------------


def key_converter(data_type: DataType) -> Callable[[Any], Ident]:
    if isinstance(data_type, StringType | CharType | VarcharType):
        return key_name
    if isinstance(data_type, IntegralType):
        return key_id
    if isinstance(data_type, StructType):
        parts = [(f.name, _key_part(f.dataType, f.name)) for f in data_type.fields]
        return lambda value: composite_key_name(value, parts)
    raise SinkSchemaError(
        f"column {KEY_COLUMN!r} has type {data_type.simpleString()}; a key must be a string "
        "(key name), an integer (key id) or a struct of those (composite key name)"
    )


def key_name(value: Any) -> str:
    if value is None:
        raise BadKeyError(f"a row has a null {KEY_COLUMN!r}")
    name = str(value)
    if not name or (name.startswith("__") and name.endswith("__")):
        raise BadKeyError(f"{KEY_COLUMN!r} {name!r}: Datastore forbids empty and __x__ names")
    if len(name.encode()) > MAX_KEY_NAME_BYTES:
        raise BadKeyError(f"{KEY_COLUMN!r} {name[:40]!r}... is longer than 1500 bytes")
    return name


def key_id(value: Any) -> int:
    if value is None:
        raise BadKeyError(f"a row has a null {KEY_COLUMN!r}")
    if int(value) <= 0:
        raise BadKeyError(f"{KEY_COLUMN!r} {value}: a numeric key id must be positive")
    return int(value)


def composite_key_name(value: Any, parts: Sequence[tuple[str, Convert]]) -> str:
    if value is None:
        raise BadKeyError(f"a row has a null {KEY_COLUMN!r}")
    rendered = []
    for index, (name, render) in enumerate(parts):
        if value[index] is None:
            raise BadKeyError(f"a row has a null key part {KEY_COLUMN}.{name}")
        rendered.append(render(value[index]))
    return key_name(json.dumps(rendered, ensure_ascii=False, separators=(",", ":")))


def _key_part(data_type: DataType, name: str) -> Convert:
    if isinstance(data_type, StringType | CharType | VarcharType):
        return str
    if isinstance(data_type, IntegralType | BooleanType):
        return lambda value: value
    if isinstance(data_type, DecimalType):
        return str
    if isinstance(data_type, TimestampType | TimestampNTZType | DateType):
        temporal = converter(data_type, name)
        return lambda value: temporal(value).isoformat()
    raise SinkSchemaError(
        f"key part {KEY_COLUMN}.{name} has type {data_type.simpleString()}; key parts must be "
        "strings, integers, booleans, decimals, dates or timestamps"
    )


# -- values ------------------------------------------------------------------------


def converter(data_type: DataType, column: str) -> Convert:
    """Spark value -> a value the Datastore client stores faithfully."""
    if isinstance(data_type, _STORED_AS_IS):
        return _same
    simple = _SIMPLE.get(type(data_type))
    if simple is not None:
        return _nullable(simple)
    if isinstance(data_type, ArrayType):
        return _array(data_type, column)
    if isinstance(data_type, StructType):
        return _struct(data_type, column)
    if isinstance(data_type, MapType):
        return _map(data_type, column)
    raise SinkSchemaError(
        f"column {column!r} has type {data_type.simpleString()}, which Datastore cannot "
        "store; cast it in the transform"
    )


def _same(value: Any) -> Any:
    return value


def _nullable(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def local_to_utc(value: datetime) -> datetime:
    """PySpark's ``TimestampType``: a naive datetime in the process's local time."""
    return value.astimezone(UTC)


def ntz_to_utc(value: datetime) -> datetime:
    """``TimestampNTZType``: a naive wall-clock time, stored as that time in UTC."""
    return value.replace(tzinfo=UTC)


def date_to_utc(value: date) -> datetime:
    return datetime.combine(value, time(0), tzinfo=UTC)


_STORED_AS_IS: Final = (
    StringType,
    CharType,
    VarcharType,
    BooleanType,
    IntegralType,
    FloatType,
    DoubleType,
    NullType,
)
_SIMPLE: Final[Mapping[type[DataType], Convert]] = {
    TimestampType: local_to_utc,
    TimestampNTZType: ntz_to_utc,
    DateType: date_to_utc,
    DecimalType: str,
    BinaryType: bytes,
}


def _array(data_type: ArrayType, column: str) -> Convert:
    if isinstance(data_type.elementType, ArrayType):
        raise SinkSchemaError(f"column {column!r}: Datastore arrays cannot contain arrays")
    element = converter(data_type.elementType, column)
    return _nullable(lambda values: [element(v) for v in values])


def _struct(data_type: StructType, column: str) -> Convert:
    fields = [(f.name, converter(f.dataType, f"{column}.{f.name}")) for f in data_type.fields]
    return _nullable(lambda row: embedded({name: c(row[i]) for i, (name, c) in enumerate(fields)}))


def _map(data_type: MapType, column: str) -> Convert:
    value = converter(data_type.valueType, f"{column}[]")
    return _nullable(lambda mapping: embedded({str(k): value(v) for k, v in mapping.items()}))


def embedded(properties: Mapping[str, Any]) -> Any:
    """An embedded (keyless) entity."""
    entity = Entity()  # type: ignore[no-untyped-call]
    entity.update(properties)
    return entity


def unindexed(properties: Mapping[str, Any]) -> set[str]:
    """Properties to exclude from indexes: long strings and blobs (Datastore rejects
    them indexed) and embedded entities (nobody queries into them)."""
    return {name for name, value in properties.items() if _unindexable(value)}


def _unindexable(value: Any) -> bool:
    if isinstance(value, list):
        return any(_unindexable(v) for v in value)
    if isinstance(value, dict):
        return True
    if isinstance(value, str):
        return len(value) * 4 > MAX_INDEXED_BYTES and len(value.encode()) > MAX_INDEXED_BYTES
    if isinstance(value, bytes):
        return len(value) > MAX_INDEXED_BYTES
    return False
