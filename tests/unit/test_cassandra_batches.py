"""How the Cassandra sink groups a partition's rows into batches
(``sluice_job.sinks.cassandra_batches``) and reads rows out of Arrow batches
(``sluice_job.sinks.arrow_rows``): what decides whether Cassandra warns, refuses or
loses nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sluice_api.sink import CassandraSink
from sluice_job.sinks.arrow_rows import rows
from sluice_job.sinks.cassandra_batches import Bounds, estimated_size, grouped

pytestmark = pytest.mark.unit


def test_each_batch_holds_one_replica_set_and_at_most_the_row_bound() -> None:
    writes = [(("a",) if i % 3 else ("b",), 10, i) for i in range(25)]

    batches = list(grouped(writes, Bounds(rows=4, bytes=10_000)))

    group_of = {i: g for g, _, i in writes}
    assert all(len({group_of[i] for i in batch}) == 1 for batch in batches)
    assert max(len(b) for b in batches) == 4
    assert sorted(i for b in batches for i in b) == list(range(25))


def test_a_batch_stays_below_the_byte_bound_and_a_big_row_goes_alone() -> None:
    writes = [("g", 400, "small-1"), ("g", 400, "small-2"), ("g", 5_000, "big"), ("g", 400, "x")]

    batches = list(grouped(writes, Bounds(rows=10, bytes=1_000)))

    assert batches == [["small-1", "small-2"], ["big"], ["x"]]


def test_full_batches_leave_at_once_so_memory_is_one_batch_per_replica_set() -> None:
    def writes():  # type: ignore[no-untyped-def]
        for i in range(1_000_000):
            yield ("g", 1, i)

    first = next(grouped(writes(), Bounds(rows=10, bytes=10_000)))

    assert first == list(range(10))


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 3_000)), max_size=200),
    st.integers(1, 20),
    st.integers(1, 6_000),
)
def test_no_write_is_lost_or_doubled_and_bounds_hold(
    items: list[tuple[str, int]], max_rows: int, max_bytes: int
) -> None:
    writes = [(group, size, index) for index, (group, size) in enumerate(items)]

    batches = list(grouped(writes, Bounds(rows=max_rows, bytes=max_bytes)))

    assert sorted(i for b in batches for i in b) == list(range(len(items)))
    for batch in batches:
        assert len(batch) <= max_rows
        assert len({items[i][0] for i in batch}) == 1
        assert len(batch) == 1 or sum(items[i][1] for i in batch) <= max_bytes
        assert batch == sorted(batch)  # input order within a group


def test_the_estimate_counts_each_value_and_its_write_time() -> None:
    assert estimated_size([b"abc", None, b"12345678"]) == 3 + 0 + 8 + 3 * 8


def test_the_spec_refuses_batches_cassandra_would_refuse() -> None:
    base = {"contactPoints": ["c:9042"], "keyspace": "k", "table": "t"}
    with pytest.raises(ValidationError, match="batchBytes"):
        CassandraSink.model_validate({**base, "batchBytes": 60_000})
    with pytest.raises(ValidationError, match="batchRows"):
        CassandraSink.model_validate({**base, "batchRows": 0})
    assert CassandraSink.model_validate(base).batch_rows == 10


def test_arrow_rows_come_back_in_the_shapes_a_spark_row_has() -> None:
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    batch = pa.RecordBatch.from_pydict(
        {
            "id": ["a", "b"],
            "n": pa.array([1, None], pa.int64()),
            "at": pa.array([when, when], pa.timestamp("us", tz="UTC")),
            "tags": pa.array([[("x", 1)], None], pa.map_(pa.string(), pa.int32())),
            "point": pa.array(
                [{"x": 1.5, "y": 2.5}, None], pa.struct([("x", pa.float64()), ("y", pa.float64())])
            ),
            "nested": pa.array([[[("k", "v")]], []], pa.list_(pa.map_(pa.string(), pa.string()))),
            "price": pa.array([Decimal("1.25"), None], pa.decimal128(5, 2)),
        }
    )

    got = list(rows(batch, ["n", "id", "at", "tags", "point", "nested", "price"]))

    assert got == [
        (1, "a", when, {"x": 1}, (1.5, 2.5), [{"k": "v"}], Decimal("1.25")),
        (None, "b", when, None, None, [], None),
    ]
