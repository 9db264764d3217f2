"""Event-time windows on keyed state (``sluice_job.windows``, issue 41 item 2) with a
real Spark session and Cassandra: distinct visitors per page and 10-second window,
written once, when the watermark passes the window's end, whether or not the batch
that closes it touched it; late records are set apart, a re-run of a batch closes the
same windows, and sliding windows count an event in each window it is in. Each
batch runs as the driver runs it: the transform at the batch's version and
watermark, its state written, the watermark moved by its event times."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_api.event_time import EventTime
from sluice_job import event_time, windows
from sluice_job.state import States
from sluice_job.transform import TransformResult
from tests.support.keyed_state import Batches, prepared

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LATENESS_S = 5
VISITORS = {
    "name": "visitors",
    "table": "page_visitors",
    "key": [{"name": "page", "type": "text"}, {"name": "window_start", "type": "timestamp"}],
    "columns": [{"name": "users", "type": "set<text>"}],
    "window": {"start": "window_start", "sizeSeconds": 10},
}
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def unique_visitors(
    records: DataFrame, options: Mapping[str, Any], state: States
) -> TransformResult:
    """Distinct users per page and window, written once per window when final."""
    del options
    parts = event_time.split(records, "at", state)
    visitors = state["visitors"]
    partial_rows = (
        windows.assign(parts.on_time, "at", visitors)
        .groupBy("page", "window_start")
        .agg(F.collect_set("user").alias("users"))
    )
    closed = windows.close(partial_rows, visitors, parts.times, {"users": windows.UNION})
    output = closed.final.select("page", "window_start", F.size("users").alias("visitors"))
    return TransformResult(output, state={"visitors": closed.state}, event_time=parts.times)


@dataclass
class Pipeline:
    """Batches of (page, user, seconds after T0) events through ``unique_visitors``."""

    batches: Batches

    def batch(
        self, version: int, events: list[tuple[str, str, float]], *, commit: bool = True
    ) -> list[tuple[str, int, int]]:
        """The windows written, as (page, window start in seconds after T0, visitors)."""
        rows = [
            (p, u, T0 + dt.timedelta(seconds=s), "k", "v", "t", 0, i)
            for i, (p, u, s) in enumerate(events)
        ]
        records = self.batches.spark.createDataFrame(
            rows,
            "page string, user string, at timestamp, key string, value string, "
            "topic string, partition int, offset long",
        )
        return sorted(
            (r["page"], int(r["window_start"].timestamp() - T0.timestamp()), r["visitors"])
            for r in self.batches.run(version, records, commit=commit)
        )


def pipeline(
    spark: SparkSession, cassandra: Any, contact: str, keyspace: str, body: Mapping[str, Any]
) -> Pipeline:
    clock = EventTime(allowed_lateness_seconds=LATENESS_S)
    states = prepared(cassandra, contact, keyspace, body, event_time=clock)
    return Pipeline(Batches(spark, states, unique_visitors, LATENESS_S))


def test_each_window_is_written_once_when_the_watermark_passes_its_end(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    p = pipeline(spark_session, cassandra, cassandra_contact, cassandra_keyspace, VISITORS)
    # watermark 12 - 5 = 7 s: no window has ended
    assert p.batch(100, [("/a", "u1", 1), ("/a", "u2", 3), ("/a", "u1", 4), ("/b", "u1", 12)]) == []
    # watermark 16 - 5 = 11 s: /a's [0, 10) is final though this batch did not touch it;
    # the first attempt crashes after its writes, the second closes the same window
    second = [("/a", "u1", 16), ("/c", "u3", 14), ("/c", "u4", 15)]
    assert p.batch(200, second, commit=False) == [("/a", 0, 2)]
    assert p.batch(200, second) == [("/a", 0, 2)]
    # /b at 2 s is behind the watermark (late, not counted); 40 s closes every [10, 20)
    assert p.batch(300, [("/b", "u9", 2), ("/z", "u1", 40)]) == [
        ("/a", 10, 1),
        ("/b", 10, 1),
        ("/c", 10, 2),
    ]
    # nothing is written twice: no window is open but /z's [40, 50)
    assert p.batch(400, [("/z", "u2", 41)]) == []
    open_rows = cassandra.execute(
        f"SELECT page, window_start, sluice_deleted FROM {cassandra_keyspace}.page_visitors "
        "PER PARTITION LIMIT 1"
    )
    live = sorted(r.page for r in open_rows if not r.sluice_deleted)
    assert live == ["/z"]
    index = cassandra.execute(
        f"SELECT key, window_start FROM {cassandra_keyspace}.sluice_open_windows"
    )
    opened = sorted((r.key, r.window_start.replace(tzinfo=dt.UTC) - T0) for r in index)
    assert opened == [('{"page":"/z"}', dt.timedelta(seconds=40))], "closed windows leave the index"
    assert p.batch(500, [("/q", "u5", 60)]) == [("/z", 40, 2)]


def test_a_sliding_window_counts_an_event_in_each_window_it_is_in(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    sliding = {
        **VISITORS,
        "window": {"start": "window_start", "sizeSeconds": 10, "slideSeconds": 5},
    }
    p = pipeline(spark_session, cassandra, cassandra_contact, cassandra_keyspace, sliding)
    assert p.batch(100, [("/a", "u1", 7), ("/a", "u2", 12)]) == []  # watermark 7
    # watermark 30 - 5 = 25: windows [0,10) [5,15) [10,20) [15,25) have ended
    assert p.batch(200, [("/b", "u3", 30)]) == [("/a", 0, 1), ("/a", 5, 2), ("/a", 10, 1)]
