"""A Cassandra sink table as a test sees it: its columns, their CQL types and its
primary key, and whether a transform's output fits it.

The driver learns the table from Cassandra when it starts, and a batch's write
refuses an output with a column the table lacks or without a primary-key column; a
value of the wrong type is refused only when the sink binds it (cassandra-driver's
``TypeError``). Either fails the batch, at run time. A test of a transform
(``sluice_job.testing``) has no Cassandra, but the user has the table's ``CREATE
TABLE`` statement (the ``schema.cql`` they create it with), so this module reads that
statement and compares it with the output's Spark schema, naming every column that
would fail and the cast that fixes it.

Which Spark types a CQL type takes (:data:`SCALARS`) is what the sink writes
faithfully: the Python value Spark hands the sink for that type is one the driver
serializes for the column without overflow, truncation or loss of precision. A wider
integer into a narrower column, a double into ``float``, a timestamp into ``date``
are refused here though some of their values would pass at run time.

:func:`parse` and :func:`problems` are purely computational.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from pyspark.sql import types as T

INTEGRAL: Final = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
SCALARS: Final[Mapping[str, tuple[type[T.DataType], ...]]] = {
    "ascii": (T.StringType,),
    "text": (T.StringType,),
    "varchar": (T.StringType,),
    "tinyint": (T.ByteType,),
    "smallint": (T.ByteType, T.ShortType),
    "int": (T.ByteType, T.ShortType, T.IntegerType),
    "bigint": INTEGRAL,
    "varint": INTEGRAL,
    "float": (T.FloatType,),
    "double": (T.FloatType, T.DoubleType),
    "decimal": (T.DecimalType, *INTEGRAL),
    "boolean": (T.BooleanType,),
    "timestamp": (T.TimestampType, T.TimestampNTZType, T.DateType),
    "date": (T.DateType,),
    "blob": (T.BinaryType,),
    "uuid": (T.StringType,),
    "timeuuid": (T.StringType,),
}
"""The Spark types each scalar CQL type takes (``list``, ``set`` and ``map`` take
arrays and maps of them)."""
CASTS: Final[Mapping[str, str]] = {
    "ascii": "string",
    "text": "string",
    "varchar": "string",
    "varint": "bigint",
    "decimal": "decimal(38,18)",
    "blob": "binary",
}
"""The Spark type to cast to for a CQL type, where its name is not the CQL one."""
UNWRITABLE: Final[Mapping[str, str]] = {
    "counter": "the sink writes with INSERT, which a counter column refuses",
}
"""CQL types no output column can be written to, and why."""
COLLECTIONS: Final = {"list": 1, "set": 1, "map": 2}


class CqlSchemaError(ValueError):
    """The CQL text holds no usable ``CREATE TABLE`` statement; the message says why."""


@dataclass(frozen=True)
class CqlType:
    """A CQL type: ``int``, or ``map<text, list<int>>`` as ``map`` with two arguments
    (``frozen<...>`` is left out: it changes how Cassandra stores a value, not which)."""

    name: str
    args: tuple[CqlType, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}<{', '.join(map(str, self.args))}>" if self.args else self.name


@dataclass(frozen=True)
class CqlTable:
    """A sink table: ``columns`` maps each column to its CQL type (a ``CqlType`` or its
    text, e.g. ``"list<int>"``), ``primary_key`` lists the partition-key columns, then
    the clustering columns. Build one from a mapping, or with :func:`parse` from the
    table's ``CREATE TABLE`` statement."""

    name: str
    columns: Mapping[str, CqlType | str]
    primary_key: tuple[str, ...] = field(default=())

    def type_of(self, column: str) -> CqlType:
        declared = self.columns[column]
        return declared if isinstance(declared, CqlType) else parse_type(declared)


_COMMENTS: Final = re.compile(r"--[^\n]*|//[^\n]*|/\*.*?\*/", re.DOTALL)
_NAME: Final = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*)'
_CREATE: Final = re.compile(
    rf"\bCREATE\s+(?:TABLE|COLUMNFAMILY)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    rf"(?P<name>{_NAME}(?:\s*\.\s*{_NAME})?)\s*\(",
    re.IGNORECASE,
)
_PRIMARY_KEY: Final = re.compile(r"\bPRIMARY\s+KEY\b", re.IGNORECASE)
_STATIC: Final = re.compile(r"\bSTATIC\b", re.IGNORECASE)


def parse(cql: str, table: str | None = None) -> CqlTable:
    """The table of the ``CREATE TABLE`` statement in ``cql`` (a whole ``schema.cql``
    may hold keyspaces and other tables); with several, ``table`` names the one
    (``keyspace.table`` or ``table``)."""
    text = _COMMENTS.sub(" ", cql)
    found = [_table(text, match) for match in _CREATE.finditer(text)]
    if table is not None:
        found = [t for t in found if table in (t.name, t.name.split(".")[-1])]
    if len(found) != 1:
        names = [t.name for t in found] or "none"
        wanted = f" named {table!r}" if table is not None else ""
        raise CqlSchemaError(
            f"expected one CREATE TABLE statement{wanted} in the CQL, found {names}"
            + ("; name the sink table" if len(found) > 1 else "")
        )
    return found[0]


def problems(table: CqlTable, schema: T.StructType) -> list[str]:
    """Why an output of ``schema`` would fail against ``table``: output columns the
    table lacks, primary-key columns the output lacks, columns whose Spark type the
    CQL type does not take. Empty when it fits."""
    found = [
        f"output column {name!r} is not a column of {table.name}: drop it from the "
        f"output or add it to the table (its columns: {', '.join(table.columns)})"
        for name in schema.names
        if name not in table.columns
    ]
    found += [
        f"primary key column {name!r} of {table.name} is not in the output"
        for name in table.primary_key
        if name not in schema.names
    ]
    for spark_field in schema.fields:
        if spark_field.name in table.columns:
            found += _type_problems(spark_field, table.type_of(spark_field.name))
    return found


def fits(cql: CqlType, spark: T.DataType) -> bool:
    """Whether the sink writes a value of ``spark`` into a column of ``cql``."""
    if isinstance(spark, T.NullType):
        return cql.name not in UNWRITABLE
    if cql.name in ("list", "set"):
        return isinstance(spark, T.ArrayType) and fits(cql.args[0], spark.elementType)
    if cql.name == "map":
        return (
            isinstance(spark, T.MapType)
            and fits(cql.args[0], spark.keyType)
            and fits(cql.args[1], spark.valueType)
        )
    return isinstance(spark, SCALARS.get(cql.name, ()))


def known(cql: CqlType) -> bool:
    """Whether :func:`fits` knows ``cql`` (tuples, user types, ``duration``, ``inet``
    and the like are not checked)."""
    if cql.name in COLLECTIONS:
        return all(known(arg) for arg in cql.args)
    return cql.name in SCALARS or cql.name in UNWRITABLE


def spark_type(cql: CqlType) -> str | None:
    """The Spark type (as ``cast`` takes it) that writes ``cql``; ``None`` if none does."""
    if cql.name in COLLECTIONS:
        args = [spark_type(arg) for arg in cql.args]
        if None in args:
            return None
        return f"array<{args[0]}>" if cql.name != "map" else f"map<{args[0]},{args[1]}>"
    if cql.name not in SCALARS:
        return None
    return CASTS.get(cql.name, cql.name)


def parse_type(text: str) -> CqlType:
    """``map<text, frozen<list<int>>>`` as a :class:`CqlType` (names lower-cased)."""
    tokens = re.findall(r'"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*|[<>,]', text)
    parsed, rest = _type(tokens)
    if rest:
        raise CqlSchemaError(f"cannot read the CQL type {text!r}")
    return parsed


def _type(tokens: Sequence[str]) -> tuple[CqlType, Sequence[str]]:
    if not tokens or tokens[0] in "<>,":
        raise CqlSchemaError(f"cannot read a CQL type at {' '.join(tokens)!r}")
    name, rest = tokens[0].lower(), tokens[1:]
    args: list[CqlType] = []
    if rest and rest[0] == "<":
        rest = rest[1:]
        while True:
            arg, rest = _type(rest)
            args.append(arg)
            if not rest:
                raise CqlSchemaError("unclosed '<' in a CQL type")
            separator, rest = rest[0], rest[1:]
            if separator == ">":
                break
    if name == "frozen" and len(args) == 1:
        return args[0], rest
    if name in COLLECTIONS and len(args) != COLLECTIONS[name]:
        raise CqlSchemaError(f"{name} takes {COLLECTIONS[name]} type argument(s), not {len(args)}")
    return CqlType(name, tuple(args)), rest


def _type_problems(spark_field: T.StructField, cql: CqlType) -> list[str]:
    name, spark = spark_field.name, spark_field.dataType
    if cql.name in UNWRITABLE:
        return [f"column {name!r} is {cql}: {UNWRITABLE[cql.name]}"]
    if not known(cql) or fits(cql, spark):
        return []
    target = spark_type(cql)
    fix = f"cast it (F.col({name!r}).cast({target!r}))" if target else "change its type"
    return [
        f"column {name!r}: the output's {spark.simpleString()} does not fit CQL {cql}; "
        f"{fix} or change the table's column"
    ]


def _table(text: str, create: re.Match[str]) -> CqlTable:
    body = _body(text, create.end())
    columns: dict[str, CqlType | str] = {}
    key: list[str] = []
    for item in _split(body):
        key_clause = _PRIMARY_KEY.match(item.strip())
        if key_clause is not None:
            key = [_identifier(n) for n in re.findall(_NAME, item.strip()[key_clause.end() :])]
            continue
        column = re.match(rf"\s*({_NAME})\s+(.*)$", item, re.DOTALL)
        if column is None:
            raise CqlSchemaError(f"cannot read the column definition {item.strip()!r}")
        name, rest = _identifier(column[1]), column[2]
        inline_key = _PRIMARY_KEY.search(rest)
        if inline_key is not None:
            key = [name]
            rest = rest[: inline_key.start()]
        columns[name] = parse_type(_STATIC.sub(" ", rest))
    name = ".".join(_identifier(part.strip()) for part in _split_name(create["name"]))
    return CqlTable(name, columns, tuple(key))


def _body(text: str, start: int) -> str:
    depth = 1
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index]
    raise CqlSchemaError("unclosed '(' in a CREATE TABLE statement")


def _split(body: str) -> list[str]:
    """The body's items, split at the commas outside ``(...)`` and ``<...>``."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(body):
        depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(body[start:index])
            start = index + 1
    items.append(body[start:])
    return [item for item in items if item.strip()]


def _split_name(name: str) -> list[str]:
    return re.findall(_NAME, name)


def _identifier(token: str) -> str:
    """A CQL identifier as Cassandra stores it: quoted ones as written, others in
    lower case."""
    if token.startswith('"'):
        return token[1:-1].replace('""', '"')
    return token.lower()
