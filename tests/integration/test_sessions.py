"""Event-time sessions on keyed state (``sluice_job.sessions``, issue 41 item 2) with
a real Spark session and Cassandra: a user's events less than the gap apart are one
session, written once when the watermark passes its last event plus the gap, whether
or not the closing batch touched the user; a session spans batches, an on-time event
that bridges two open sessions joins them, late events are set apart, and a re-run
of a batch closes the same sessions. Batches run as the driver runs them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_api.event_time import EventTime
from sluice_job import event_time, sessions, windows
from sluice_job.state import States
from sluice_job.transform import TransformResult
from tests.support.keyed_state import Batches, prepared

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

GAP_S, LATENESS_S = 10, 5
SESSIONS = {
    "name": "sessions",
    "table": "open_sessions",
    "key": [{"name": "user", "type": "text"}],
    "columns": [{"name": "events", "type": "bigint"}, {"name": "pages", "type": "set<text>"}],
    "session": {"gapSeconds": GAP_S},
}
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
Written = tuple[str, int, int, int, tuple[str, ...]]


def user_sessions(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    """Sessions per user: their events and distinct pages, written once when final."""
    del options
    parts = event_time.split(records, "at", state)
    events = parts.on_time.select(
        "user", "at", F.lit(1).cast("long").alias("events"), F.array("page").alias("pages")
    )
    merge = {"events": windows.SUM, "pages": windows.UNION}
    closed = sessions.close(events, "at", state["sessions"], parts.times, merge)
    output = closed.final.select(
        "user", sessions.SESSION_START, sessions.SESSION_END, "events", "pages"
    )
    return TransformResult(output, state={"sessions": closed.state}, event_time=parts.times)


def run(
    batches: Batches, version: int, events: list[tuple[str, str, float]], *, commit: bool = True
) -> list[Written]:
    """Events as (user, page, seconds after T0); the sessions written, as (user,
    start and end in seconds after T0, events, sorted pages)."""
    rows = [
        (u, p, T0 + dt.timedelta(seconds=s), "k", "v", "t", 0, i)
        for i, (u, p, s) in enumerate(events)
    ]
    records = batches.spark.createDataFrame(
        rows,
        "user string, page string, at timestamp, key string, value string, topic string, "
        "partition int, offset long",
    )

    def seconds(at: dt.datetime) -> int:
        return int(at.replace(tzinfo=dt.UTC).timestamp() - T0.timestamp())

    return sorted(
        (r.user, seconds(r.session_start), seconds(r.session_end), r.events, tuple(sorted(r.pages)))
        for r in batches.run(version, records, commit=commit)
    )


def test_each_session_is_written_once_when_the_watermark_passes_its_gap(
    spark_session: SparkSession, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    clock = EventTime(allowed_lateness_seconds=LATENESS_S)
    states = prepared(cassandra, cassandra_contact, cassandra_keyspace, SESSIONS, event_time=clock)
    b = Batches(spark_session, states, user_sessions, LATENESS_S)
    # watermark 5 - 5 = 0: nothing has ended
    assert run(b, 100, [("u1", "/a", 1), ("u1", "/b", 5), ("u2", "/a", 2)]) == []
    # u1's 13 s is within the gap of its session [1, 5]: the session grows; watermark 9.
    # The first attempt crashes after its writes; the second reads the same state.
    second = [("u1", "/a", 13), ("u3", "/c", 14)]
    assert run(b, 200, second, commit=False) == []
    assert run(b, 200, second) == []
    # watermark 17: u2's session (last event 2 s) ended at 12 s though this batch did
    # not touch u2; u1's first index entry (15 s) is stale and closes nothing
    assert run(b, 300, [("u4", "/d", 22)]) == [("u2", 2, 2, 1, ("/a",))]
    # u2 at 3 s is late (behind 17 s); u5's 20 s and 32 s are a gap apart: two
    # sessions. Watermark 27: u1 (ends 13 + 10) and u3 (14 + 10) are final.
    assert run(b, 400, [("u2", "/z", 3), ("u5", "/a", 20), ("u5", "/b", 32)]) == [
        ("u1", 1, 13, 3, ("/a", "/b")),
        ("u3", 14, 14, 1, ("/c",)),
    ]
    stored = cassandra.execute(
        f"SELECT sluice_sessions, events FROM {cassandra_keyspace}.open_sessions "
        "WHERE user = 'u5' LIMIT 1"
    ).one()
    assert sorted(stored.events.values()) == [1, 1], "u5 keeps two open sessions in one row"
    # 28 s is on time and within the gap of both u5's sessions: they join
    assert run(b, 500, [("u5", "/c", 28), ("u9", "/a", 60)]) == [
        ("u4", 22, 22, 1, ("/d",)),
        ("u5", 20, 32, 3, ("/a", "/b", "/c")),
    ]
    live = cassandra.execute(
        f"SELECT user, sluice_deleted FROM {cassandra_keyspace}.open_sessions PER PARTITION LIMIT 1"
    )
    assert sorted(r.user for r in live if not r.sluice_deleted) == ["u9"]
    assert run(b, 600, [("u9", "/b", 200)]) == [("u9", 60, 60, 1, ("/a",))]
