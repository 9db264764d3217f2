"""``sluice_job.cql_table``: a sink table read from its ``CREATE TABLE`` statement, and
an output's Spark schema checked against it (issue 39 item 6). Pure: Spark's types
are Python objects, no session is needed; ``tests/integration/test_transform_testing.py``
runs the check on real transforms' output through ``sluice_job.testing``."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from sluice_dev.paths import REPO_ROOT
from sluice_job.cql_table import (
    CqlSchemaError,
    CqlTable,
    CqlType,
    fits,
    parse,
    parse_type,
    problems,
)

pytestmark = pytest.mark.unit


def schema(**columns: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(name, kind) for name, kind in columns.items()])


def test_the_kpi_examples_table_with_its_compound_key() -> None:
    table = parse((REPO_ROOT / "examples/kpi-schema.cql").read_text())
    assert table.name == "analytics.page_kpis"
    assert {name: str(table.type_of(name)) for name in table.columns} == {
        "page": "text",
        "window_start": "timestamp",
        "batch_id": "bigint",
        "views": "bigint",
        "clicks": "bigint",
        "events": "bigint",
    }
    assert table.primary_key == ("page", "window_start", "batch_id")


def test_the_custom_transform_examples_table_with_an_inline_key() -> None:
    table = parse((REPO_ROOT / "examples/custom-transform/schema.cql").read_text())
    assert (table.name, table.primary_key) == ("clicks.click_scores", ("event_id",))
    assert str(table.type_of("score")) == "int"


def test_names_are_case_folded_unless_quoted_and_comments_options_static_are_ignored() -> None:
    table = parse(
        """
        -- a comment (with a parenthesis
        create table if not exists Shop."Orders" (
            "orderId" text, /* block, comment */ Line int,
            Tags frozen<set<text>> static,
            Totals map<text, frozen<list<decimal>>>,
            PRIMARY KEY (("orderId"), line)
        ) WITH comment = 'a; b (c)' AND CLUSTERING ORDER BY (line DESC);
        """
    )
    assert table.name == "shop.Orders"
    assert list(table.columns) == ["orderId", "line", "tags", "totals"]
    assert table.primary_key == ("orderId", "line")
    assert table.type_of("totals") == CqlType(
        "map", (CqlType("text"), CqlType("list", (CqlType("decimal"),)))
    )


def test_a_file_with_several_tables_needs_the_sinks_name() -> None:
    cql = "CREATE TABLE ks.a (id text PRIMARY KEY); CREATE TABLE ks.b (id int PRIMARY KEY);"
    with pytest.raises(CqlSchemaError, match=r"found \['ks.a', 'ks.b'\]; name the sink table"):
        parse(cql)
    assert str(parse(cql, "ks.b").type_of("id")) == "int"
    assert parse(cql, "a").name == "ks.a"
    with pytest.raises(CqlSchemaError, match="named 'c'"):
        parse(cql, "c")


def test_a_collection_without_its_type_arguments_is_refused() -> None:
    with pytest.raises(CqlSchemaError, match="map takes 2"):
        parse_type("map<text>")


@pytest.mark.parametrize(
    ("cql", "spark"),
    [
        ("text", T.StringType()),
        ("varchar", T.StringType()),
        ("ascii", T.StringType()),
        ("tinyint", T.ByteType()),
        ("smallint", T.ShortType()),
        ("int", T.IntegerType()),
        ("int", T.ShortType()),
        ("bigint", T.LongType()),
        ("bigint", T.IntegerType()),
        ("varint", T.LongType()),
        ("float", T.FloatType()),
        ("double", T.DoubleType()),
        ("double", T.FloatType()),
        ("decimal", T.DecimalType(10, 2)),
        ("decimal", T.LongType()),
        ("boolean", T.BooleanType()),
        ("timestamp", T.TimestampType()),
        ("timestamp", T.TimestampNTZType()),
        ("date", T.DateType()),
        ("blob", T.BinaryType()),
        ("list<int>", T.ArrayType(T.IntegerType())),
        ("set<text>", T.ArrayType(T.StringType())),
        ("map<text, bigint>", T.MapType(T.StringType(), T.LongType())),
        ("frozen<list<map<text, double>>>", T.ArrayType(T.MapType(T.StringType(), T.DoubleType()))),
        ("int", T.NullType()),
    ],
)
def test_what_a_cql_type_takes(cql: str, spark: T.DataType) -> None:
    assert fits(parse_type(cql), spark)


@pytest.mark.parametrize(
    ("cql", "spark", "cast"),
    [
        ("int", T.LongType(), "'int'"),
        ("smallint", T.IntegerType(), "'smallint'"),
        ("tinyint", T.ShortType(), "'tinyint'"),
        ("text", T.IntegerType(), "'string'"),
        ("bigint", T.StringType(), "'bigint'"),
        ("varint", T.DecimalType(20, 0), "'bigint'"),
        ("float", T.DoubleType(), "'float'"),
        ("decimal", T.DoubleType(), "'decimal(38,18)'"),
        ("boolean", T.IntegerType(), "'boolean'"),
        ("timestamp", T.LongType(), "'timestamp'"),
        ("timestamp", T.StringType(), "'timestamp'"),
        ("date", T.TimestampType(), "'date'"),
        ("blob", T.StringType(), "'binary'"),
        ("list<int>", T.ArrayType(T.LongType()), "'array<int>'"),
        ("set<text>", T.StringType(), "'array<string>'"),
        ("map<text, int>", T.MapType(T.StringType(), T.StringType()), "'map<string,int>'"),
    ],
)
def test_a_type_the_column_does_not_take_is_named_with_the_cast_that_fixes_it(
    cql: str, spark: T.DataType, cast: str
) -> None:
    table = CqlTable("ks.t", {"id": "text", "v": cql}, ("id",))
    [problem] = problems(table, schema(id=T.StringType(), v=spark))
    assert problem.startswith(f"column 'v': the output's {spark.simpleString()} does not fit")
    assert f"F.col('v').cast({cast})" in problem


def test_a_column_the_sink_cannot_write_is_named() -> None:
    table = CqlTable("ks.t", {"id": "text", "v": "counter"}, ("id",))
    [problem] = problems(table, schema(id=T.StringType(), v=T.StringType()))
    assert problem.startswith("column 'v' is counter: ")


@pytest.mark.parametrize("cql", ["uuid", "timeuuid"])
def test_a_uuid_column_takes_strings(cql: str) -> None:
    """Spark has no UUID type; the sink binds the strings as UUIDs."""
    table = CqlTable("ks.t", {"id": "text", "v": cql}, ("id",))
    assert problems(table, schema(id=T.StringType(), v=T.StringType())) == []
    [problem] = problems(table, schema(id=T.StringType(), v=T.LongType()))
    assert "does not fit" in problem


def test_types_the_check_does_not_know_are_left_alone() -> None:
    table = CqlTable("ks.t", {"id": "text", "ip": "inet", "pair": "tuple<int, text>"}, ("id",))
    assert problems(table, schema(id=T.StringType(), ip=T.StringType(), pair=T.LongType())) == []


def test_columns_the_table_lacks_and_key_columns_the_output_lacks_are_all_named() -> None:
    table = parse("CREATE TABLE ks.t (a text, b int, c bigint, d text, PRIMARY KEY ((a, b), c))")
    found = problems(table, schema(a=T.StringType(), d=T.StringType(), extra=T.LongType()))
    assert found == [
        "output column 'extra' is not a column of ks.t: drop it from the output or add it "
        "to the table (its columns: a, b, c, d)",
        "primary key column 'b' of ks.t is not in the output",
        "primary key column 'c' of ks.t is not in the output",
    ]


def test_a_fitting_output_has_no_problems() -> None:
    table = CqlTable("ks.t", {"id": "text", "n": CqlType("bigint"), "tags": "set<text>"}, ("id",))
    fitting = schema(id=T.StringType(), n=T.IntegerType(), tags=T.ArrayType(T.StringType()))
    assert problems(table, fitting) == []
