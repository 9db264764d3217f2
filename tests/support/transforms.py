"""Transforms used by the tests: the example's cleaned events, tagged with the
``tag`` option so a test can tell which driver (or code version) wrote a row."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job import event_time, keys
from sluice_job.examples.ui_events import clean
from sluice_job.transform import REJECT_COLUMNS, TransformResult

EVENTS_TABLE = """CREATE TABLE {keyspace}.events (event_id text PRIMARY KEY, seq bigint,
    page text, action text, user_id text, event_time timestamp, source_topic text,
    source_partition int, source_offset bigint, tag text)"""

ORDER_STATE_TABLE = """CREATE TABLE {keyspace}.order_state (order_id text PRIMARY KEY,
    status text, event_time timestamp, tag text)"""
"""One row per order, its latest status by event time (``spec.sink.orderColumn``)."""


def tagged(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    cleaned = clean(records)
    tag = F.lit(str(options["tag"]))
    return cleaned.with_output(cleaned.output.drop("batch_id").withColumn("tag", tag))


def tagged_v2(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    """A second code version: actions upper-cased, so its rows differ visibly."""
    result = tagged(records, options)
    return result.with_output(result.output.withColumn("action", F.upper(F.col("action"))))


def paced(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    """The tagged events at a known cost: ``secondsPerRecord`` of work per row (in
    the Python workers), so a batch's time grows with its records as in a slow sink."""
    pause = float(options["secondsPerRecord"])

    @F.udf("string")
    def slowly(tag: str) -> str:
        time.sleep(pause)
        return tag

    result = tagged(records, options)
    return result.with_output(result.output.withColumn("tag", slowly(F.col("tag"))))


def coin_flip(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    """Output or reject by a random number, as Spark is told it is (the UDF is marked
    non-deterministic): the choice differs between the output's and the rejects' jobs."""

    @F.udf("boolean")
    def heads() -> bool:
        return random.random() < 0.5

    decided = records.withColumn("heads", heads.asNondeterministic()())
    kept = tagged(decided.where(F.col("heads")).drop("heads"), options)
    rejects = decided.where(~F.col("heads")).select(
        "key", "value", "topic", "partition", "offset", F.lit("tails").alias("reason")
    )
    return TransformResult(kept.output, rejects)


def order_state(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
    """Order events (JSON ``{"order": ..., "status": ..., "ms": <event time>}``) as
    the ``order_state`` table's rows, tagged; two events of one order in a batch
    keep their source position, so the sink ranks them (``keys``)."""
    event = F.from_json(
        F.col("value").cast("string"), "`order` string, status string, ms bigint"
    ).alias("e")
    return records.select(event, keys.POSITION).select(
        F.col("e.order").alias("order_id"),
        F.col("e.status").alias("status"),
        F.timestamp_millis(F.col("e.ms")).alias("event_time"),
        F.lit(str(options["tag"])).alias("tag"),
        keys.POSITION,
    )


PAGE_TOTALS_STATE = {
    "name": "totals",
    "table": "page_totals",
    "key": [{"name": "page", "type": "text"}],
    "columns": [{"name": "views", "type": "bigint"}],
}
"""``spec.transform.state`` of :func:`page_totals`."""


def page_totals(records: DataFrame, options: Mapping[str, Any], state: Any) -> TransformResult:
    """The tagged events, and each page's events since the start as keyed state
    (``totals``): the stored total plus this batch's."""
    result = tagged(records, options)
    touched = result.output.groupBy("page").agg(F.count(F.lit(1)).alias("n"))
    totals = state["totals"].lookup(touched)
    new = touched.join(totals, "page", "left").select(
        "page", (F.coalesce(F.col("views"), F.lit(0)) + F.col("n")).alias("views")
    )
    return TransformResult(result.output, result.rejects, {"totals": new})


PAGE_TIME_V1: dict[str, Any] = {
    "name": "durations",
    "table": "page_time",
    "key": [{"name": "page", "type": "text"}],
    "columns": [{"name": "duration", "type": "bigint"}],
}
"""``spec.transform.state`` of :func:`page_seconds`: each page's time, in seconds."""
PAGE_TIME_V2 = {**PAGE_TIME_V1, "revision": 2, "migrate": "tests.support.transforms:seconds_to_ms"}
"""Of :func:`page_milliseconds`: the same time in milliseconds, v1's rows migrated."""


def page_seconds(records: DataFrame, options: Mapping[str, Any], state: Any) -> TransformResult:
    """The tagged events, and each page's time on it as keyed state (``durations``):
    one second per event, added to the stored time."""
    return _page_time(records, options, state, unit=1)


def page_milliseconds(
    records: DataFrame, options: Mapping[str, Any], state: Any
) -> TransformResult:
    """Version 2 of :func:`page_seconds`: its state in milliseconds (revision 2)."""
    return _page_time(records, options, state, unit=1_000)


def _page_time(
    records: DataFrame, options: Mapping[str, Any], state: Any, *, unit: int
) -> TransformResult:
    result = tagged(records, options)
    touched = result.output.groupBy("page").agg((F.count(F.lit(1)) * unit).alias("n"))
    stored = state["durations"].lookup(touched)
    new = touched.join(stored, "page", "left").select(
        "page", (F.coalesce(F.col("duration"), F.lit(0)) + F.col("n")).alias("duration")
    )
    return TransformResult(result.output, result.rejects, {"durations": new})


def seconds_to_ms(row: dict[str, Any], revision: int) -> dict[str, Any] | None:
    """A state's ``migrate``: revision 1 kept ``duration`` in seconds, revision 2 in
    milliseconds; a row with no duration is dropped (no state)."""
    assert revision == 1, revision
    if row["duration"] is None:
        return None
    return {**row, "duration": row["duration"] * 1000}


def late_aware(records: DataFrame, options: Mapping[str, Any], state: Any) -> TransformResult:
    """The tagged events of the records at or after the event-time watermark (their
    JSON's ``ts``); the records behind it as rejects, through ``event_time.split``."""
    ts = F.get_json_object(F.col("value").cast("string"), "$.ts").cast("long")
    parts = event_time.split(
        records.withColumn("ts_event", F.timestamp_millis(ts)), "ts_event", state
    )
    result = tagged(parts.on_time.drop("ts_event"), options)
    rejects = result.rejects
    if parts.late is not None:
        rejects = (
            parts.late
            if rejects is None
            else rejects.select(*REJECT_COLUMNS).unionByName(parts.late)
        )
    return TransformResult(result.output, rejects, event_time=parts.times)


def tasks_tagged(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    """The tagged events, their tag followed by the tasks the batch was read in
    (``v1:1``: one task), so a test sees how a batch ran."""
    result = tagged(records, options)
    tag = F.lit(f"{options['tag']}:{records.rdd.getNumPartitions()}")
    return result.with_output(result.output.withColumn("tag", tag))


def repartitioned(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    """The tagged events spread again over four partitions: a shuffle of its own."""
    result = tagged(records, options)
    return result.with_output(result.output.repartition(4))
