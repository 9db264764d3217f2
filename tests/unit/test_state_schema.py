"""Keyed state's declaration (``spec.transform.state``) and what the driver makes of
it (``sluice_job.state.schema``): the spec refuses a malformed declaration, the table
is one row per key and version, and a table that does not fit is refused naming the
columns (issue 41 item 1). Pure: no Cassandra, no Spark session."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError
from pyspark.sql import types as T

from sluice_api.event_time import advance, later
from sluice_api.state import State
from sluice_api.transform import Transform
from sluice_job import transform
from sluice_job.cql_table import parse_type
from sluice_job.state.schema import Existing, StateSchema, StateSchemaError, problems, spark_of
from sluice_job.transform import EntrypointError

pytestmark = pytest.mark.unit

OWNER = "team-a/clicks"


def declared(**extra: Any) -> State:
    body = {
        "name": "totals",
        "table": "page_totals",
        "key": [{"name": "page", "type": "text"}],
        "columns": [{"name": "views", "type": "bigint"}, {"name": "users", "type": "set<text>"}],
        **extra,
    }
    return State.model_validate(body)


def existing(schema: StateSchema, **changes: Any) -> Existing:
    """The table ``schema.create`` makes, as Cassandra's metadata describes it."""
    fields: dict[str, Any] = {
        "columns": schema.columns(),
        "partition_key": schema.key_names,
        "clustering_key": ("sluice_version",),
        "comment": f"sluice state {schema.name} of pipeline {OWNER}",
    }
    return Existing(**(fields | changes))


def test_a_declaration_names_each_column_once_and_not_the_drivers_own() -> None:
    with pytest.raises(ValidationError, match=r"each column is named once, not \['views'\]"):
        declared(columns=[{"name": "views", "type": "bigint"}, {"name": "Views", "type": "int"}])
    with pytest.raises(ValidationError, match=r"\['sluice_version'\] are the driver's own"):
        declared(columns=[{"name": "sluice_version", "type": "bigint"}])
    with pytest.raises(ValidationError, match="key"):
        declared(key=[])
    with pytest.raises(ValidationError, match="revision 2 needs migrate"):
        declared(revision=2)
    assert declared(revision=2, migrate="m:f").migrate == "m:f"


def test_a_transform_declares_each_state_and_table_once() -> None:
    state = declared().model_dump(by_alias=True)
    body = {"entrypoint": "m:f", "state": [state, {**state, "table": "other"}]}
    with pytest.raises(ValidationError, match=r"state name is declared once, not \['totals'\]"):
        Transform.model_validate(body)
    body = {"entrypoint": "m:f", "state": [state, {**state, "name": "other"}]}
    with pytest.raises(ValidationError, match=r"table is declared once, not \['.page_totals'\]"):
        Transform.model_validate(body)
    assert Transform.model_validate({"entrypoint": "m:f", "state": [state]}).state[0].name == (
        "totals"
    )


def test_the_table_is_one_row_per_key_and_version_newest_first() -> None:
    schema = StateSchema.of(declared(ttlSeconds=3600), "ks")
    assert schema.where == "ks.page_totals"
    assert schema.ttl_seconds == 3600
    assert schema.create(OWNER) == (
        'CREATE TABLE IF NOT EXISTS "ks"."page_totals" ("page" text, "sluice_version" bigint, '
        '"views" bigint, "users" set<text>, "sluice_deleted" boolean, "sluice_revision" int, '
        'PRIMARY KEY (("page"), "sluice_version")) '
        'WITH CLUSTERING ORDER BY ("sluice_version" DESC) '
        "AND comment = 'sluice state totals of pipeline team-a/clicks'"
    )
    assert StateSchema.of(declared(keyspace="other"), "ks").where == "other.page_totals"


def test_a_lookup_has_the_key_and_value_columns_as_spark_types() -> None:
    schema = StateSchema.of(declared(), "ks")
    assert schema.spark_schema() == T.StructType(
        [
            T.StructField("page", T.StringType()),
            T.StructField("views", T.LongType()),
            T.StructField("users", T.ArrayType(T.StringType(), containsNull=True)),
        ]
    )
    assert spark_of(parse_type("map<text, int>")) == T.MapType(T.StringType(), T.IntegerType())
    assert spark_of(parse_type("counter")) is None


def test_a_type_no_state_column_takes_is_refused_naming_the_column() -> None:
    with pytest.raises(StateSchemaError, match=r"state 'totals', column 'hits'.*'counter'"):
        StateSchema.of(declared(columns=[{"name": "hits", "type": "counter"}]), "ks")


def test_the_table_it_made_fits_and_a_new_value_column_is_added() -> None:
    schema = StateSchema.of(declared(), "ks")
    assert problems(schema, existing(schema), OWNER) == ([], [])
    older = {k: v for k, v in schema.columns().items() if k != "users"}
    assert problems(schema, existing(schema, columns=older), OWNER) == (["users"], [])
    assert schema.add_column("users") == 'ALTER TABLE "ks"."page_totals" ADD "users" set<text>'


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"comment": ""}, "it is not this pipeline's state"),
        ({"comment": "sluice state totals of pipeline team-b/clicks"}, "not this pipeline's"),
        ({"partition_key": ("page", "day")}, r"partition key is \['page', 'day'\]"),
        ({"clustering_key": ()}, r"clustering key is \[\], not \[sluice_version\]"),
    ],
)
def test_a_table_that_is_not_this_states_is_refused(changes: dict[str, Any], reason: str) -> None:
    schema = StateSchema.of(declared(), "ks")
    _, found = problems(schema, existing(schema, **changes), OWNER)
    assert any(re.search(reason, f) for f in found), found


def test_a_changed_type_or_a_dropped_column_is_refused_naming_it() -> None:
    schema = StateSchema.of(declared(), "ks")
    retyped = schema.columns() | {"views": "int"}
    _, found = problems(schema, existing(schema, columns=retyped), OWNER)
    assert found == ["column views is int in the table, declared bigint"]
    widened = schema.columns() | {"clicks": "bigint"}
    _, found = problems(schema, existing(schema, columns=widened), OWNER)
    assert len(found) == 1
    assert "column(s) ['clicks'] the state no longer declares" in found[0]
    collections = schema.columns() | {"users": "set<text>"}
    assert problems(schema, existing(schema, columns=collections), OWNER) == ([], [])


def stateless(records: Any, options: Any) -> Any:
    return records


def stateful(records: Any, options: Any, state: Any) -> Any:
    return records


def test_a_stateful_pipeline_needs_a_function_that_takes_the_state() -> None:
    module = __name__
    with pytest.raises(EntrypointError, match=r"must take \(records, options, state\)"):
        transform.load(f"{module}:stateless", stateful=True)
    assert transform.load(f"{module}:stateful", stateful=True) is stateful
    assert transform.load(f"{module}:stateless") is stateless


def test_the_watermark_moves_to_the_newest_event_minus_the_lateness_and_never_back() -> None:
    assert advance(None, None, 5) is None, "no event time seen yet"
    assert advance(None, 60_000, 5) == 55_000
    assert advance(55_000, 50_000, 5) == 55_000, "older events leave it"
    assert advance(55_000, None, 5) == 55_000, "a batch without events leaves it"
    assert advance(55_000, 70_000, 0) == 70_000
    assert later(None, 3) == 3
    assert later(3, None) == 3
    assert later(4, 3) == 4


def test_a_window_state_starts_on_a_timestamp_key_and_needs_event_time() -> None:
    key = [{"name": "page", "type": "text"}, {"name": "at", "type": "timestamp"}]
    window = declared(key=key, window={"start": "at", "sizeSeconds": 60, "slideSeconds": 20})
    schema = StateSchema.of(window, "ks", OWNER)
    assert schema.window is not None
    assert (schema.window.start, schema.window.size_seconds, schema.window.slide_seconds) == (
        "at",
        60,
        20,
    )
    assert schema.window_key == ("page",)
    assert schema.owner == OWNER
    with pytest.raises(ValidationError, match="must be a key column of type timestamp"):
        declared(key=key, window={"start": "page", "sizeSeconds": 60})
    with pytest.raises(ValidationError, match="slideSeconds 25 must divide"):
        declared(key=key, window={"start": "at", "sizeSeconds": 60, "slideSeconds": 25})
    body = {"entrypoint": "m:f", "state": [window.model_dump(by_alias=True, exclude_none=True)]}
    with pytest.raises(ValidationError, match=r"set transform\.eventTime"):
        Transform.model_validate(body)
    assert Transform.model_validate(body | {"eventTime": {}}).state[0].window is not None


def test_a_session_state_keeps_each_value_per_open_session_and_needs_event_time() -> None:
    sessions = declared(session={"gapSeconds": 1800})
    schema = StateSchema.of(sessions, "ks", OWNER)
    assert schema.session is not None
    assert schema.session.gap_seconds == 1800
    assert dict(schema.values) == {
        "sluice_sessions": "map<timestamp,timestamp>",
        "views": "map<timestamp,bigint>",
        "users": "map<timestamp,frozen<set<text>>>",
    }
    assert '"users" map<timestamp,frozen<set<text>>>' in schema.create(OWNER)
    assert schema.indexed
    assert schema.window_key == ("page",), "indexed by the whole key"
    assert schema.closed_before(90_000) == 90_000, "a session's entry is its expiry"
    window = declared(
        key=[{"name": "at", "type": "timestamp"}], window={"start": "at", "sizeSeconds": 60}
    )
    assert StateSchema.of(window, "ks").closed_before(90_000) == 30_000, "a window's is its start"
    assert not StateSchema.of(declared(), "ks").indexed
    with pytest.raises(ValidationError, match="window or session, not both"):
        declared(
            key=[{"name": "at", "type": "timestamp"}],
            window={"start": "at", "sizeSeconds": 60},
            session={"gapSeconds": 60},
        )
    with pytest.raises(ValidationError, match="driver's own"):
        declared(columns=[{"name": "sluice_sessions", "type": "bigint"}])
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        declared(session={"gapSeconds": 0})
    body = {"entrypoint": "m:f", "state": [sessions.model_dump(by_alias=True, exclude_none=True)]}
    with pytest.raises(ValidationError, match=r"set transform\.eventTime"):
        Transform.model_validate(body)
