"""``sluice_job.testing``: a transform tested on sample records, with no server, as a
user's plain pytest would (issue 14 item 3), and its output checked against the sink
table's ``CREATE TABLE`` statement (issue 39 item 6)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import NumberFormatException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_dev.paths import REPO_ROOT
from sluice_job import testing
from sluice_job.sinks import SinkSchemaError
from sluice_job.transform import EntrypointError, NondeterministicTransformError
from tests.support.transforms import EVENTS_TABLE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

EVENT = {
    "event_id": "e-1",
    "seq": 1,
    "page": "/Home/?ref=ad",
    "action": "CLICK",
    "user_id": "u-3",
    "ts": 1_763_780_400_123,
}


def test_the_events_example_gives_a_cleaned_row_and_rejects_with_reasons(
    spark_session: Any,
) -> None:
    result = testing.run(
        "sluice_job.examples.events:transform",
        [
            {"key": "k-1", "value": EVENT},
            "not json",
            {"value": {**EVENT, "event_id": "e-2", "page": None}},
        ],
        topic="ui-events",
        spark=spark_session,
    )
    [row] = result.output
    assert (row["event_id"], row["page"], row["action"]) == ("e-1", "/home", "click")
    assert (row["source_topic"], row["source_partition"], row["source_offset"]) == (
        "ui-events",
        0,
        0,
    )
    assert [(r["offset"], r["reason"]) for r in result.rejects] == [
        (1, "malformed JSON"),
        (2, "missing field page"),
    ]
    assert result.rejects[0]["value"] == b"not json"


def test_sample_records_come_from_a_json_lines_file(spark_session: Any, tmp_path: Path) -> None:
    sample = tmp_path / "events.jsonl"
    lines = [{"value": {**EVENT, "event_id": f"e-{n}", "seq": n}, "partition": 3} for n in (5, 6)]
    sample.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = testing.run(
        "sluice_job.examples.events:transform", testing.read_jsonl(sample), spark=spark_session
    )
    assert sorted((r["event_id"], r["source_partition"]) for r in result.output) == [
        ("e-5", 3),
        ("e-6", 3),
    ]
    assert result.rejects == []


def test_a_transform_the_driver_would_refuse_is_refused_here_too(spark_session: Any) -> None:
    with pytest.raises(NondeterministicTransformError, match=r"spec\.transform\.entrypoint"):
        testing.run(
            "tests.support.transforms:coin_flip",
            [{"value": EVENT}],
            {"tag": "t"},
            spark=spark_session,
        )


def test_the_kpi_example_fits_its_sink_table(spark_session: Any) -> None:
    result = testing.run(
        "sluice_job.examples.kpi:transform",
        [{"value": EVENT}, {"value": {**EVENT, "event_id": "e-2", "action": "view"}}],
        sink_table=REPO_ROOT / "examples" / "kpi-schema.cql",
        spark=spark_session,
    )
    assert result.schema is not None
    assert result.schema.names == [
        "page",
        "window_start",
        "batch_id",
        "views",
        "clicks",
        "events",
    ]


def test_an_output_the_driver_writes_to_cassandra_fits_its_table_here(
    spark_session: Any,
) -> None:
    """The integration tests' own transform and table, which the driver writes."""
    testing.run(
        "tests.support.transforms:tagged",
        [{"value": EVENT}],
        {"tag": "t"},
        sink_table=EVENTS_TABLE.format(keyspace="ks"),
        spark=spark_session,
    )


SCORES_CQL = """
CREATE KEYSPACE IF NOT EXISTS shop WITH replication = {'class': 'SimpleStrategy',
  'replication_factor': 1};
CREATE TABLE IF NOT EXISTS shop.scores (
  event_id text, day date, score int, tags set<text>, PRIMARY KEY (event_id, day));
"""


def scores(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
    """Deliberately off the table: the offset (a long) as the int score, the Kafka
    timestamp as the day, a column the table lacks."""
    payload = F.from_json(F.col("value").cast("string"), "event_id string")
    return records.select(
        payload["event_id"].alias("event_id"),
        F.col("timestamp").alias("day"),
        F.col("offset").alias("score"),
        F.array(F.lit("a")).alias("tags"),
        F.lit("x").alias("note"),
    )


def test_every_mismatch_with_the_sink_table_is_named_with_its_fix(
    spark_session: Any, tmp_path: Path
) -> None:
    schema_file = tmp_path / "schema.cql"
    schema_file.write_text(SCORES_CQL)
    with pytest.raises(SinkSchemaError) as raised:
        testing.run(scores, [{"value": EVENT}], sink_table=schema_file, spark=spark_session)
    assert str(raised.value).splitlines() == [
        "the output does not fit the sink table shop.scores:",
        "- output column 'note' is not a column of shop.scores: drop it from the output or "
        "add it to the table (its columns: event_id, day, score, tags)",
        "- column 'day': the output's timestamp does not fit CQL date; cast it "
        "(F.col('day').cast('date')) or change the table's column",
        "- column 'score': the output's bigint does not fit CQL int; cast it "
        "(F.col('score').cast('int')) or change the table's column",
    ]


def test_the_fixed_output_fits_and_a_null_key_in_a_row_is_named(spark_session: Any) -> None:
    def fixed(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
        output = scores(records, options).drop("note")
        return output.withColumns(
            {"day": F.col("day").cast("date"), "score": F.col("score").cast("int")}
        )

    result = testing.run(fixed, [{"value": EVENT}], sink_table=SCORES_CQL, spark=spark_session)
    assert [(r["event_id"], r["score"], r["tags"]) for r in result.output] == [("e-1", 0, ["a"])]
    with pytest.raises(
        SinkSchemaError, match=r"output row 1 has a null primary key column \['event_id'\]"
    ):
        testing.run(
            fixed,
            [{"value": EVENT}, {"value": {"page": "/"}}],
            sink_table=testing.cql_table(SCORES_CQL, "scores"),
            spark=spark_session,
        )


def test_spark_sql_runs_in_ansi_mode_so_a_bad_cast_fails_and_try_cast_gives_null(
    spark_session: Any,
) -> None:
    """docs/writing-a-transform.md, "What your code runs on": Spark 4's default, as in
    the driver; a pipeline would fail the batch on the malformed record."""

    def amounts(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
        value = F.col("value").cast("string")
        return records.select(value.alias("raw"), value.try_cast("int").alias("amount"))

    def strict(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
        return records.select(F.col("value").cast("string").cast("int").alias("amount"))

    assert spark_session.conf.get("spark.sql.ansi.enabled") == "true"
    result = testing.run(amounts, ["12", "12x"], spark=spark_session)
    assert [(r["raw"], r["amount"]) for r in result.output] == [("12", 12), ("12x", None)]
    with pytest.raises(NumberFormatException, match="CAST_INVALID_INPUT"):
        testing.run(strict, ["12", "12x"], spark=spark_session)


SEEN = {"name": "seen", "table": "seen", "key": [{"name": "event_id", "type": "text"}]}


def test_a_stateful_transform_is_tested_with_the_state_it_finds_and_gives(
    spark_session: Any,
) -> None:
    """The de-duplication example: an id the state holds counts no more, an id sent
    twice in the batch counts once, and the new state is the ids counted."""
    events = [
        {"value": {**EVENT, "event_id": "e-1"}},
        {"value": {**EVENT, "event_id": "e-2"}},
        {"value": {**EVENT, "event_id": "e-2"}},
        {"value": {**EVENT, "event_id": "e-3", "action": "view"}},
    ]
    result = testing.run(
        "sluice_job.examples.dedup:transform",
        events,
        {"windowSeconds": 60},
        spark=spark_session,
        state=[SEEN],
        stored={"seen": [{"event_id": "e-1"}]},
    )
    assert sorted(r["event_id"] for r in result.state["seen"]) == ["e-2", "e-3"]
    assert [(r["page"], r["views"], r["clicks"], r["events"]) for r in result.output] == [
        ("/home", 1, 1, 2)
    ]
    with pytest.raises(EntrypointError, match=r"must take \(records, options, state\)"):
        testing.run("sluice_job.examples.kpi:transform", events, spark=spark_session, state=[SEEN])
    with pytest.raises(ValueError, match=r"stored names state\(s\) \['other'\]"):
        testing.run(
            "sluice_job.examples.dedup:transform",
            events,
            spark=spark_session,
            state=[SEEN],
            stored={"other": []},
        )


def test_a_transform_with_event_time_is_tested_against_a_watermark(spark_session: Any) -> None:
    old = {"value": {**EVENT, "ts": 1_763_780_400_000}}
    new = {"value": {**EVENT, "event_id": "e-2", "ts": 1_763_780_460_000}}
    result = testing.run(
        "tests.support.transforms:late_aware",
        [old, new],
        {"tag": "t"},
        spark=spark_session,
        event_time={"allowedLatenessSeconds": 10, "late": "DeadLetter"},
        watermark=datetime(2025, 11, 22, 3, 0, 30, tzinfo=UTC),
    )
    assert [r["event_id"] for r in result.output] == ["e-2"]
    assert [r["offset"] for r in result.rejects] == [0]
    assert result.rejects[0]["reason"].startswith("late: event time 2025-11-22T03:00:00.000Z")


def test_a_window_state_is_tested_with_the_windows_the_batch_touches(spark_session: Any) -> None:
    """The unique-visitors example: the stored window and the batch's events merge, and
    the watermark the batch moves (its newest event minus the lateness) closes it."""
    visitors = {
        "name": "visitors",
        "table": "v",
        "key": [{"name": "page", "type": "text"}, {"name": "window_start", "type": "timestamp"}],
        "columns": [{"name": "users", "type": "set<text>"}],
        "window": {"start": "window_start", "sizeSeconds": 60},
    }
    start = datetime(2025, 11, 22, 3, 0, tzinfo=UTC)
    events = [
        {"value": {**EVENT, "page": "/a", "user_id": "u-1", "ts": 1_763_780_410_000}},
        {
            "value": {
                **EVENT,
                "event_id": "e-2",
                "page": "/a",
                "user_id": "u-9",
                "ts": 1_763_780_530_000,
            }
        },
    ]
    result = testing.run(
        "sluice_job.examples.unique_visitors:transform",
        events,
        spark=spark_session,
        state=[visitors],
        stored={"visitors": [{"page": "/a", "window_start": start, "users": ["u-1", "u-2"]}]},
        event_time={"allowedLatenessSeconds": 5},
    )
    assert [(r["page"], r["visitors"]) for r in result.output] == [("/a", 2)]
    assert sorted((r["page"], r["sluice_deleted"]) for r in result.state["visitors"]) == [
        ("/a", False),
        ("/a", True),
    ]


def test_a_session_state_is_tested_with_the_sessions_the_batch_touches(spark_session: Any) -> None:
    """The sessions example: a stored open session grows by the batch's event within
    the gap, and closes once the batch's later event moves the watermark past it."""
    body = {
        "name": "sessions",
        "table": "s",
        "key": [{"name": "user_id", "type": "text"}],
        "columns": [{"name": "events", "type": "bigint"}],
        "session": {"gapSeconds": 1800},
    }
    start = datetime(2025, 11, 22, 2, 50, tzinfo=UTC)
    events = [
        {"value": {**EVENT, "user_id": "u-1", "ts": 1_763_780_400_000}},  # 03:00
        {"value": {**EVENT, "event_id": "e-2", "user_id": "u-1", "ts": 1_763_788_000_000}},
    ]
    result = testing.run(
        "sluice_job.examples.sessions:transform",
        events,
        spark=spark_session,
        state=[body],
        stored={
            "sessions": [
                {"user_id": "u-1", "sluice_sessions": {start: start}, "events": {start: 4}}
            ]
        },
        event_time={"allowedLatenessSeconds": 60},
    )
    ended = datetime(2025, 11, 22, 3, 0)
    assert [
        (r["user_id"], r["session_start"], r["session_end"], r["events"]) for r in result.output
    ] == [("u-1", start.replace(tzinfo=None), ended, 5)]
    (open_row,) = result.state["sessions"]
    assert open_row["sluice_deleted"] is False
    assert list(open_row["events"].values()) == [1], "the later event opened a session"
