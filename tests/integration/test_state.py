"""Keyed state as Cassandra rows (issue 41 item 1), with a real Spark session and a
real Cassandra node: the transform reads the state of the keys its batch touches and
returns their new state; the driver's parts (``sluice_job.state``) create the table,
look the keys up inside the batch's Spark job and write the new rows under the
batch's version and the driver's epoch. What a user checks: a running total is
exact over batches, a re-run of a batch after a crash counts its records once, a
fenced driver's late write loses, a deleted key starts again, a column added by v2
of the transform reads null in v1's rows, and a table that does not fit is refused
with its columns named, before anything is read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_api.event_time import EventTime, LateRecords
from sluice_job import event_time, transform
from sluice_job.state import DELETED, States, StateShapeError
from sluice_job.state import tally as state_tally
from sluice_job.state import write as state_write
from sluice_job.state.handle import Kept
from sluice_job.state.schema import StateSchemaError
from sluice_job.transform import NondeterministicTransformError, TransformResult
from sluice_job.write_order import write_version
from tests.support.keyed_state import prepared

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OWNER = "tests/running-totals"
TOTALS = {
    "name": "totals",
    "table": "page_totals",
    "key": [{"name": "page", "type": "text"}],
    "columns": [{"name": "views", "type": "bigint"}],
    "ttlSeconds": 86_400,
}


def running_totals(
    records: DataFrame, options: Mapping[str, Any], state: States
) -> TransformResult:
    """Views per page since the start: this batch's count plus the stored total;
    a page whose record says ``reset`` has its total deleted."""
    del options
    touched = records.groupBy("page").agg(
        F.count(F.lit(1)).alias("n"), F.max(F.col("action") == "reset").alias("reset")
    )
    totals = state["totals"].lookup(touched)
    joined = touched.join(totals, "page", "left")
    new = joined.select(
        "page",
        (F.coalesce(F.col("views"), F.lit(0)) + F.col("n")).alias("views"),
        F.col("reset").alias(DELETED),
    )
    return TransformResult(new.where(~F.col(DELETED)), state={"totals": new})


def declare(cassandra: Any, contact: str, keyspace: str, body: Mapping[str, Any]) -> States:
    """The state as the driver makes it at start: the table ensured, a target per state."""
    return prepared(cassandra, contact, keyspace, body, owner=OWNER)


def run_batch(
    spark: SparkSession,
    states: States,
    version: int,
    events: list[tuple[str, str]],
    *,
    epoch: int = 1,
    function: transform.TransformFn = running_totals,
    tally: state_tally.Tally | None = None,
) -> list[tuple[str, int]]:
    """One batch as the executor runs it: the transform at the batch's version, its
    output collected and its new state written; returns the output, sorted."""
    records = spark.createDataFrame(events, "page string, action string")
    kept = Kept()
    batch = states.at(version, tally=tally, kept=kept)
    try:
        result = transform.apply(function, records, {}, batch)
        output = sorted((r["page"], r["views"]) for r in result.output.collect())
        for name, rows in result.state.items():
            state_write.write(batch[name], rows, write_version(version, epoch))
    finally:
        kept.release()
    return output


def stored(cassandra: Any, keyspace: str) -> dict[str, list[tuple[int, int | None, bool]]]:
    """Each page's rows in the table, newest first: (version, views, deleted)."""
    rows: dict[str, list[tuple[int, int | None, bool]]] = {}
    for r in cassandra.execute(
        f"SELECT page, sluice_version, views, sluice_deleted FROM {keyspace}.page_totals"
    ):
        rows.setdefault(r.page, []).append((r.sluice_version, r.views, r.sluice_deleted))
    return {page: sorted(found, reverse=True) for page, found in rows.items()}


def views(events: str) -> list[tuple[str, str]]:
    return [(page, "view") for page in events.split()]


def test_a_running_total_is_exact_and_readable_with_cql(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    assert run_batch(spark_session, states, 100, views("/a /a /b")) == [("/a", 2), ("/b", 1)]
    assert run_batch(spark_session, states, 200, views("/a /c")) == [("/a", 3), ("/c", 1)]
    assert run_batch(spark_session, states, 300, views("/a /b /b")) == [("/a", 4), ("/b", 3)]

    rows = stored(cassandra, cassandra_keyspace)
    # the newest row of each key is its state; one row before it is kept, so that a
    # re-run of the newest batch reads it; older ones are deleted by the next write
    assert rows == {
        "/a": [(300, 4, False), (200, 3, False)],
        "/b": [(300, 3, False), (100, 1, False)],
        "/c": [(200, 1, False)],
    }
    ttl = cassandra.execute(
        f"SELECT TTL(views) AS ttl FROM {cassandra_keyspace}.page_totals WHERE page = '/a' LIMIT 1"
    ).one()
    assert 86_000 < ttl.ttl <= 86_400, "the state's TTL"


def test_a_batchs_state_requests_are_counted_by_the_tasks_that_make_them(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    """What the batch's log line and ``sluice_state_seconds`` report: keys read and
    written, and the seconds the requests took, summed by the Spark tasks."""
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    tally = state_tally.tally(spark_session.sparkContext)
    run_batch(spark_session, states, 100, views("/a /a /b /c"), tally=tally)
    first = tally.value
    # three pages: looked up once (the output's job and the state's share the lookup),
    # their versions read again by the write; written once
    assert (first.keys_read, first.keys_written) == (6, 3)
    assert first.read_seconds > 0
    assert first.write_seconds > 0
    run_batch(spark_session, states, 200, views("/a /d"), tally=tally)
    second = tally.value - first
    assert (second.keys_read, second.keys_written) == (4, 2)


def test_a_batch_run_again_reads_the_state_from_before_it(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    """A driver that crashed after writing batch 200's state (not its commit) runs
    the batch again, as does its successor: the records count once."""
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    run_batch(spark_session, states, 100, views("/a /a"))
    first = run_batch(spark_session, states, 200, views("/a /b"), epoch=1)
    again = run_batch(spark_session, states, 200, views("/a /b"), epoch=1)
    successor = run_batch(spark_session, states, 200, views("/a /b"), epoch=2)
    assert first == again == successor == [("/a", 3), ("/b", 1)]
    assert run_batch(spark_session, states, 300, views("/a")) == [("/a", 4)]


def test_a_fenced_drivers_late_state_write_loses(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    """A driver of epoch 1 partitioned away writes batch 200 after its successor
    (epoch 2) did, from different input (say, a code version it still runs): the
    successor's state stands, whatever the order of the writes."""
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    run_batch(spark_session, states, 100, views("/a"))
    run_batch(spark_session, states, 200, views("/a /a"), epoch=2)
    run_batch(spark_session, states, 200, views("/a /a /a /a /a"), epoch=1)
    assert stored(cassandra, cassandra_keyspace)["/a"][0] == (200, 3, False)
    assert run_batch(spark_session, states, 300, views("/a")) == [("/a", 4)]


def test_a_fenced_driver_behind_its_successor_writes_nothing_of_its_batch(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    """Frozen in batch 200 while its successor committed 200 and 300: the rows it would
    read (below 200) were deleted by the successor's write of 300, so computing from
    what is left would be wrong. Its lookups and writes fail instead."""
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    run_batch(spark_session, states, 100, views("/a /b"))
    run_batch(spark_session, states, 200, views("/a"), epoch=2)
    run_batch(spark_session, states, 300, views("/a"), epoch=2)
    before = stored(cassandra, cassandra_keyspace)
    assert before["/a"] == [(300, 3, False), (200, 2, False)], "100 deleted by 300's write"
    with pytest.raises(Exception, match=r"a newer driver holds the pipeline and has gone past"):
        run_batch(spark_session, states, 200, views("/a /a /a"), epoch=1)
    late = states.at(200)["totals"]
    rows = spark_session.createDataFrame([("/a", 99)], "page string, views bigint")
    with pytest.raises(Exception, match=r"row of batch version 300, after this batch's 200"):
        state_write.write(late, late.conform(rows), write_version(200, 1))
    assert stored(cassandra, cassandra_keyspace) == before
    assert run_batch(spark_session, states, 400, views("/a /b")) == [("/a", 4), ("/b", 2)]


def test_a_deleted_key_has_no_state_until_it_is_written_again(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    run_batch(spark_session, states, 100, views("/a /a /b"))
    assert run_batch(spark_session, states, 200, [("/a", "reset"), ("/b", "view")]) == [("/b", 2)]
    lookup = states.at(300)["totals"].lookup(
        spark_session.createDataFrame([("/a",), ("/b",)], "page string")
    )
    assert sorted(tuple(r) for r in lookup.collect()) == [("/b", 2)]
    assert run_batch(spark_session, states, 300, views("/a /b")) == [("/a", 1), ("/b", 3)]


def test_a_column_v2_adds_reads_null_in_the_rows_v1_wrote(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    v1 = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    run_batch(spark_session, v1, 100, views("/a /a"))
    v2_body = {**TOTALS, "columns": [*TOTALS["columns"], {"name": "last_action", "type": "text"}]}
    v2 = declare(cassandra, cassandra_contact, cassandra_keyspace, v2_body)

    def with_last_action(
        records: DataFrame, options: Mapping[str, Any], state: States
    ) -> TransformResult:
        result = running_totals(records, options, state)
        seen = state["totals"].lookup(records)
        assert seen.columns == ["page", "views", "last_action"]
        before = {r["page"]: (r["views"], r["last_action"]) for r in seen.collect()}
        assert before == {"/a": (2, None)}, "v1's row, the new column null"
        new = result.state["totals"].withColumn("last_action", F.lit("view"))
        return TransformResult(result.output, state={"totals": new})

    assert run_batch(spark_session, v2, 200, views("/a"), function=with_last_action) == [("/a", 3)]
    rows = cassandra.execute(
        f"SELECT views, last_action FROM {cassandra_keyspace}.page_totals WHERE page = '/a' LIMIT 1"
    ).one()
    assert (rows.views, rows.last_action) == (3, "view")


def test_a_table_that_does_not_fit_is_refused_naming_the_columns(
    cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    retyped = {**TOTALS, "columns": [{"name": "views", "type": "int"}]}
    with pytest.raises(StateSchemaError, match="column views is bigint in the table, declared int"):
        declare(cassandra, cassandra_contact, cassandra_keyspace, retyped)
    dropped = {**TOTALS, "columns": []}
    with pytest.raises(StateSchemaError, match=r"column\(s\) \['views'\] the state no longer"):
        declare(cassandra, cassandra_contact, cassandra_keyspace, dropped)
    cassandra.execute(f"CREATE TABLE {cassandra_keyspace}.mine (page text PRIMARY KEY, n int)")
    theirs = {**TOTALS, "table": "mine"}
    with pytest.raises(StateSchemaError, match="it is not this pipeline's state"):
        declare(cassandra, cassandra_contact, cassandra_keyspace, theirs)


def test_a_key_given_two_new_states_fails_the_batch_naming_it(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)

    def per_record(
        records: DataFrame, options: Mapping[str, Any], state: States
    ) -> TransformResult:
        del options, state
        new = records.select("page", F.lit(1).alias("views"))
        return TransformResult(new, state={"totals": new})

    with pytest.raises(Exception, match="gave key \\('/a',\\) two new states in one batch"):
        run_batch(spark_session, states, 100, views("/a /a"), function=per_record)
    assert stored(cassandra, cassandra_keyspace) == {}, "nothing of the key written"


def test_a_new_state_that_does_not_fit_its_declaration_is_refused(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    states = declare(cassandra, cassandra_contact, cassandra_keyspace, TOTALS)
    records = spark_session.createDataFrame(views("/a"), "page string, action string")

    def returning(**given: DataFrame) -> transform.TransformFn:
        def function(records: DataFrame, options: Mapping[str, Any], state: States) -> Any:
            del options, state
            return TransformResult(records, state=given)

        return function

    counted = records.select("page", F.lit(1).alias("views"))
    cases = {
        "undeclared": (returning(other=counted), r"state \['other'\] that spec.transform.state"),
        "extra": (
            returning(totals=counted.withColumn("clicks", F.lit(0))),
            r"has column\(s\) \['clicks'\] the state does not declare",
        ),
        "keyless": (returning(totals=counted.drop("page")), r"lacks key column\(s\) \['page'\]"),
    }
    for function, says in cases.values():
        with pytest.raises(StateShapeError, match=says):
            transform.apply(function, records, {}, states.at(100))
    random_views = counted.withColumn("views", (F.rand() * 10).cast("bigint"))
    with pytest.raises(NondeterministicTransformError, match="new state 'totals'"):
        transform.apply(returning(totals=random_views), records, {}, states.at(100))


DURATIONS = {
    "name": "durations",
    "table": "durations",
    "key": [{"name": "page", "type": "text"}],
    "columns": [{"name": "duration", "type": "bigint"}],
}


def test_a_revision_that_changes_a_columns_meaning_reads_older_rows_migrated(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    """v1 kept each page's duration in seconds; v2 (revision 2) keeps milliseconds and
    declares a migration: v1's rows read converted, once, and v2's rows as written;
    v1's code run again over v2's rows fails naming the revisions."""
    v1 = declare(cassandra, cassandra_contact, cassandra_keyspace, DURATIONS)
    target = v1.at(100)["durations"]
    seconds = spark_session.createDataFrame(
        [("/a", 3), ("/b", None), ("/c", 5)], "page string, duration bigint"
    )
    state_write.write(target, target.conform(seconds), write_version(100, 1))

    v2_body = {**DURATIONS, "revision": 2, "migrate": "tests.support.transforms:seconds_to_ms"}
    v2 = declare(cassandra, cassandra_contact, cassandra_keyspace, v2_body)
    pages = spark_session.createDataFrame([("/a",), ("/b",), ("/c",)], "page string")

    def read(states: States, version: int) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in states.at(version)["durations"].lookup(pages).collect())

    assert read(v2, 200) == [("/a", 3000), ("/c", 5000)], "migrated; /b's row dropped"
    written = v2.at(200)["durations"]
    ms = spark_session.createDataFrame([("/a", 3500)], "page string, duration bigint")
    state_write.write(written, written.conform(ms), write_version(200, 1))
    assert read(v2, 300) == [("/a", 3500), ("/c", 5000)], "v2's own row read as written"
    revisions = {
        r.page: r.sluice_revision
        for r in cassandra.execute(
            f"SELECT page, sluice_revision FROM {cassandra_keyspace}.durations "
            "WHERE page IN ('/a', '/c') PER PARTITION LIMIT 1"
        )
    }
    assert revisions == {"/a": 2, "/c": 1}

    with pytest.raises(
        Exception, match="written by revision 2, this transform declares revision 1"
    ):
        read(v1, 300)


def test_late_records_counted_are_left_out_and_the_newest_on_time_event_is_found(
    spark_session: SparkSession,
) -> None:
    """``late: Count``: split gives no rejects, and the times frame the driver counts
    gives the newest on-time event and the late ones' count."""
    counting = States((), 100, EventTime(late=LateRecords.COUNT), watermark_ms=1_000)
    events = spark_session.createDataFrame(
        [("a", 500), ("b", 999), ("c", 1_000), ("d", 4_000), ("e", None)], "id string, ms long"
    ).withColumn("at", F.timestamp_millis("ms"))
    parts = event_time.split(events, "at", counting)
    assert parts.late is None
    assert sorted(r["id"] for r in parts.on_time.collect()) == ["c", "d", "e"]
    assert event_time.newest_and_late(parts.times) == (4_000, 2)
    with pytest.raises(event_time.EventTimeError, match="lack the record's column"):
        event_time.split(events, "at", States((), 100, EventTime(), watermark_ms=1_000))
    with pytest.raises(event_time.EventTimeError, match=r"needs spec\.transform\.eventTime"):
        event_time.split(events, "at", States((), 100))
