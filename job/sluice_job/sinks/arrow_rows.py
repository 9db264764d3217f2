"""Rows of an Arrow record batch as Python values the database clients take.

The sinks take their rows out of the JVM with ``mapInArrow``: Spark hands each
Python worker columnar Arrow batches (thousands of rows per transfer) instead of
pickling ``Row`` objects one by one, which was most of a batch's write time. The
clients want Python values, so each column is converted once with ``to_pylist``
and the rows are zipped from the columns.

Arrow's Python values are what ``Row`` gave, except in three places, which are
brought back to the ``Row`` shapes the clients already take: a map is a list of
``(key, value)`` pairs (made a ``dict``), a struct is a ``dict`` (made a tuple in
field order, as a ``Row`` is), and a timestamp carries its time zone (kept: the
clients convert aware datetimes to UTC correctly, where a ``Row``'s naive local
time was only right on a machine set to UTC).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

Convert = Callable[[Any], Any]


def rows(batch: pa.RecordBatch, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The batch's rows as tuples of ``names``' values, in that order."""
    columns = [_column(batch.column(batch.schema.get_field_index(n))) for n in names]
    return zip(*columns, strict=True) if columns else iter(())


def _column(array: pa.Array) -> list[Any]:
    values: list[Any] = array.to_pylist()
    convert = converter(array.type)
    return values if convert is None else [convert(v) for v in values]


def converter(kind: pa.DataType) -> Convert | None:
    """How a value of ``kind`` from ``to_pylist`` becomes a ``Row``'s value; ``None``
    when it already is one."""
    if pa.types.is_map(kind):
        key, item = converter(kind.key_type), converter(kind.item_type)
        return lambda pairs: _map(pairs, key, item)
    if pa.types.is_struct(kind):
        fields = [
            (kind.field(i).name, converter(kind.field(i).type)) for i in range(kind.num_fields)
        ]
        return lambda value: _struct(value, fields)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        element = converter(kind.value_type)
        if element is None:
            return None
        return lambda values: None if values is None else [_apply(element, v) for v in values]
    return None


def _apply(convert: Convert | None, value: Any) -> Any:
    return value if convert is None or value is None else convert(value)


def _map(pairs: Any, key: Convert | None, item: Convert | None) -> dict[Any, Any] | None:
    if pairs is None:
        return None
    return {_apply(key, k): _apply(item, v) for k, v in pairs}


def _struct(value: Any, fields: Sequence[tuple[str, Convert | None]]) -> tuple[Any, ...] | None:
    if value is None:
        return None
    return tuple(_apply(convert, value[name]) for name, convert in fields)
