"""Rows to Datastore entities: the ``__key__`` contract, value conversion, index
exclusion, and schema errors that name the column."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from sluice_job.sinks import SinkSchemaError
from sluice_job.sinks.datastore_entities import (
    KEY_COLUMN,
    VERSION_PROPERTY,
    BadKeyError,
    EntityShape,
    shape,
    unindexed,
)

pytestmark = pytest.mark.unit


def schema(**columns: Any) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


def of(**columns: Any) -> EntityShape:
    return shape(schema(**columns))


def test_a_string_key_is_the_key_name_and_not_a_property() -> None:
    entity = of(__key__=StringType(), page=StringType())
    row = Row("e-1", "/home")
    assert entity.ident(row) == "e-1"
    assert entity.values(row) == {"page": "/home"}


def test_an_integer_key_is_the_numeric_id() -> None:
    assert of(__key__=LongType()).ident(Row(42)) == 42


def test_a_struct_key_is_a_compact_json_name_of_its_parts_in_order() -> None:
    key_type = StructType(
        [
            StructField("page", StringType()),
            StructField("window", TimestampNTZType()),
            StructField("batch", LongType()),
        ]
    )
    name = of(__key__=key_type).ident(Row(Row("/home", datetime(2025, 11, 22, 3), 17)))
    assert name == '["/home","2025-11-22T03:00:00+00:00",17]'
    assert json.loads(str(name)) == ["/home", "2025-11-22T03:00:00+00:00", 17]


@pytest.mark.parametrize(
    ("key_type", "value", "problem"),
    [
        (StringType(), None, "null"),
        (StringType(), "", "empty"),
        (StringType(), "__sys__", "__x__"),
        (StringType(), "x" * 1501, "longer than 1500 bytes"),
        (LongType(), 0, "positive"),
        (LongType(), None, "null"),
        (StructType([StructField("a", StringType())]), Row(None), "null key part __key__.a"),
    ],
)
def test_bad_keys_fail_naming_the_column(key_type: Any, value: Any, problem: str) -> None:
    with pytest.raises(BadKeyError, match=KEY_COLUMN) as raised:
        of(__key__=key_type).ident(Row(value))
    assert problem in str(raised.value)


def test_output_without_a_key_column_is_refused_with_the_fix() -> None:
    with pytest.raises(SinkSchemaError, match=r"no '__key__' column.*alias\('__key__'\)"):
        of(event_id=StringType())


@pytest.mark.parametrize(
    ("columns", "named"),
    [
        ({"__key__": DoubleType()}, "'__key__' has type double"),
        ({"__key__": StringType(), VERSION_PROPERTY: LongType()}, "reserved"),
        ({"__key__": StringType(), "__meta__": StringType()}, "'__meta__'"),
        ({"__key__": StringType(), "v": VariantType()}, "column 'v' has type variant"),
        ({"__key__": StringType(), "m": ArrayType(ArrayType(LongType()))}, "column 'm'"),
        (
            {"__key__": StructType([StructField("f", DoubleType())])},
            "key part __key__.f has type double",
        ),
    ],
)
def test_unstorable_output_is_refused_naming_the_column(
    columns: dict[str, Any], named: str
) -> None:
    with pytest.raises(SinkSchemaError, match=named.replace("(", r"\(").replace(")", r"\)")):
        of(**columns)


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone is Europe/Berlin (UTC+1 in November)."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("berlin")
def test_values_become_what_datastore_stores() -> None:
    entity = of(
        __key__=StringType(),
        ts=TimestampType(),
        ntz=TimestampNTZType(),
        day=DateType(),
        amount=DecimalType(10, 2),
        raw=BinaryType(),
        tags=ArrayType(StringType()),
        attrs=MapType(StringType(), LongType()),
        nested=StructType([StructField("n", IntegerType())]),
        missing=StringType(),
    )
    local = datetime(2025, 11, 22, 4, 30)  # PySpark: naive local time, 03:30 UTC
    values = entity.values(
        Row(
            "k",
            local,
            datetime(2025, 11, 22, 3),
            date(2025, 11, 22),
            Decimal("12.50"),
            bytearray(b"\x00\x01"),
            ["a", "b"],
            {"x": 1},
            Row(7),
            None,
        )
    )
    assert values["ts"] == datetime(2025, 11, 22, 3, 30, tzinfo=UTC)
    assert values["ntz"] == datetime(2025, 11, 22, 3, tzinfo=UTC)
    assert values["day"] == datetime(2025, 11, 22, tzinfo=UTC)
    assert values["amount"] == "12.50"
    assert values["raw"] == b"\x00\x01"
    assert values["tags"] == ["a", "b"]
    assert dict(values["attrs"]) == {"x": 1}
    assert dict(values["nested"]) == {"n": 7}
    assert values["missing"] is None


def test_long_strings_blobs_and_embedded_entities_are_unindexed() -> None:
    values = {
        "short": "x" * 1500,
        "long": "é" * 751,  # 1502 bytes
        "blob": b"x" * 1501,
        "list": ["a", "y" * 2000],
        "nested": {"a": 1},
        "n": 5,
    }
    assert unindexed(values) == {"long", "blob", "list", "nested"}
