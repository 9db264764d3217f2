"""The Cassandra sink against the stack's Cassandra node: rows of every common column
type arrive as they left Spark, every cell carries the batch's write version, an
older version never overwrites a newer one, and the writer's batches stay below
what makes Cassandra warn (which it does, here, for batches that are too big)."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from sluice_job.sinks.cassandra import CassandraSink, CassandraTarget
from sluice_job.sinks.cassandra_batches import Bounds
from sluice_job.sinks.cassandra_writer import write_rows

pytestmark = pytest.mark.integration

TYPES_TABLE = """CREATE TABLE {keyspace}.typed (id text PRIMARY KEY, n int, big bigint,
    ratio double, ok boolean, price decimal, at timestamp, day date, raw blob,
    scores list<int>, labels set<text>, counts map<text, int>,
    point frozen<tuple<double, double>>)"""
SPARK_SCHEMA = (
    "id string, n int, big long, ratio double, ok boolean, price decimal(10,2), "
    "at timestamp, day date, raw binary, scores array<int>, labels array<string>, "
    "counts map<string,int>, point struct<x: double, y: double>"
)
ROWS = 2_000
AT = datetime(2026, 11, 24, 12, 30, 15, 123000, tzinfo=UTC)


def _row(i: int) -> tuple[Any, ...]:
    raw = bytes([i % 256]) * (6_000 if i % 500 == 0 else 16)  # a few rows above a batch
    return (
        f"id-{i:05d}",
        i,
        i * 1_000_000_007,
        i / 7,
        i % 2 == 0,
        Decimal(i) / 4,
        AT,
        date(2026, 1, 1 + i % 28),
        raw,
        [i, i + 1],
        [f"l{i % 3}"],
        {"a": i},
        (float(i), -float(i)),
    )


@pytest.fixture
def typed_table(cassandra: Any, cassandra_keyspace: str) -> str:
    cassandra.execute(TYPES_TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    return cassandra_keyspace


def _target(contact: str, keyspace: str, table: str, **kw: Any) -> CassandraTarget:
    return CassandraTarget((contact,), keyspace, table, None, **kw)


def test_every_column_type_arrives_as_written_with_the_write_version(
    spark_session: Any, cassandra: Any, cassandra_contact: str, typed_table: str
) -> None:
    frame = spark_session.createDataFrame([_row(i) for i in range(ROWS)], SPARK_SCHEMA)
    sink = CassandraSink(
        _target(cassandra_contact, typed_table, "typed", bounds=Bounds(rows=7, bytes=1024))
    )

    written = sink.write(frame.repartition(3), version=4242)

    assert written == ROWS
    stored = {
        r.id: r
        for r in cassandra.execute(
            f"SELECT id, n, big, ratio, ok, price, at, day, raw, scores, labels, counts, point,"
            f" WRITETIME(n) AS wn, WRITETIME(raw) AS wr FROM {typed_table}.typed",
            timeout=60,
        )
    }
    assert len(stored) == ROWS
    for i in (0, 1, 499, 500, 1_999):
        (key, n, big, ratio, ok, price, at, day, raw, scores, labels, counts, point) = _row(i)
        got = stored[key]
        assert (got.n, got.big, got.ratio, got.ok, got.price) == (n, big, ratio, ok, price)
        assert got.at.replace(tzinfo=UTC) == at.replace(microsecond=123000)
        assert got.day.date() == day
        assert got.raw == raw
        assert (list(got.scores), set(got.labels)) == (scores, set(labels))
        assert dict(got.counts) == counts
        assert tuple(got.point) == point
    assert {(r.wn, r.wr) for r in stored.values()} == {(4242, 4242)}


def test_uuid_and_timeuuid_columns_take_the_outputs_strings(
    spark_session: Any, cassandra: Any, cassandra_contact: str, cassandra_keyspace: str
) -> None:
    """Reproduction (issue 39, item 6's review): Spark has no UUID type, the sink passed
    the strings on, and cassandra-driver refused them ("Got a non-UUID object for a
    UUID value"), so no output could fill a uuid or timeuuid column, key or not."""
    cassandra.execute(
        f"CREATE TABLE {cassandra_keyspace}.ids (id uuid PRIMARY KEY, at timeuuid, note text)",
        timeout=60,
    )
    ids = [(str(uuid.uuid4()), str(uuid.uuid1()), f"n{i}") for i in range(20)]
    frame = spark_session.createDataFrame(ids, "id string, at string, note string")
    sink = CassandraSink(_target(cassandra_contact, cassandra_keyspace, "ids"))

    assert sink.write(frame, version=7) == 20

    rows = cassandra.execute(f"SELECT id, at, note FROM {cassandra_keyspace}.ids", timeout=60)
    assert sorted((str(r.id), str(r.at), r.note) for r in rows) == sorted(ids)
    bad = spark_session.createDataFrame(
        [("not-a-uuid", None, "x")], "id string, at string, note string"
    )
    with pytest.raises(Exception, match="column 'id' is a uuid column: 'not-a-uuid' is not a UUID"):
        sink.write(bad, version=8)


def test_an_older_write_version_never_overwrites_a_newer_one(
    spark_session: Any, cassandra: Any, cassandra_contact: str, typed_table: str
) -> None:
    sink = CassandraSink(_target(cassandra_contact, typed_table, "typed"))
    newer = spark_session.createDataFrame([(f"k{i}", i) for i in range(50)], "id string, n int")
    older = spark_session.createDataFrame([(f"k{i}", -1) for i in range(50)], "id string, n int")

    sink.write(newer, version=20)
    sink.write(older, version=10)  # a fenced driver's late write

    rows = cassandra.execute(f"SELECT id, n FROM {typed_table}.typed", timeout=60)
    assert {r.id: r.n for r in rows} == {f"k{i}": i for i in range(50)}


def _events(count: int) -> list[tuple[Any, ...]]:
    return [
        (str(uuid.uuid4()), i, f"/page/{i % 40}", "click", f"user-{i}", AT, "topic-a", i % 8, i)
        for i in range(count)
    ]


EVENT_COLUMNS = [
    "event_id",
    "seq",
    "page",
    "action",
    "user_id",
    "event_time",
    "source_topic",
    "source_partition",
    "source_offset",
]


def test_default_batches_stay_below_cassandras_warnings_and_big_ones_do_not(
    cassandra: Any, cassandra_contact: str, events_table: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Cassandra answers a batch above its size or partition thresholds with a
    warning, which the client logs; the defaults must never cause one, and the
    check is real: batches of 50 rows do."""
    caplog.set_level(logging.WARNING, logger="cassandra")
    columns = [*EVENT_COLUMNS, "tag"]
    rows = [(*row, "t") for row in _events(3_000)]

    defaults = _target(cassandra_contact, events_table, "events")
    assert write_rows(defaults, columns, 1, rows) == 3_000
    assert not [r for r in caplog.records if "Server warning" in r.getMessage()]

    big = _target(cassandra_contact, events_table, "events", bounds=Bounds(50, 40_000))
    assert write_rows(big, columns, 2, rows) == 3_000
    warnings = [r.getMessage() for r in caplog.records if "Server warning" in r.getMessage()]
    assert any("batch" in w.lower() for w in warnings), warnings
    stored = cassandra.execute(f"SELECT count(*) FROM {events_table}.events", timeout=60).one()
    assert stored[0] == 3_000


def test_a_dry_run_write_counts_the_rows_and_leaves_the_table_as_it_was(
    spark_session: Any, cassandra: Any, cassandra_contact: str, typed_table: str
) -> None:
    """A standby's warm-up (``standby.warm_read``) runs the sink's job over records
    already written: with ``dry`` the rows are bound and grouped on the executors,
    and not one reaches the table, not even with a newer version."""
    sink = CassandraSink(_target(cassandra_contact, typed_table, "typed"))
    stored = spark_session.createDataFrame([(f"k{i}", i) for i in range(50)], "id string, n int")
    other = spark_session.createDataFrame([(f"k{i}", -1) for i in range(80)], "id string, n int")
    sink.write(stored, version=10)

    assert sink.write(other.repartition(3), version=20, dry=True) == 80

    rows = cassandra.execute(
        f"SELECT id, n, WRITETIME(n) AS w FROM {typed_table}.typed", timeout=60
    )
    assert {r.id: (r.n, r.w) for r in rows} == {f"k{i}": (i, 10) for i in range(50)}
