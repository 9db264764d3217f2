"""Properties of batch planning: no gap, no overlap, capped, complete."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice_api.source import OnOffsetOutOfRange, StartingOffsets
from sluice_job.offsets import OffsetRange, TopicPartition, Watermarks
from sluice_job.planner import OffsetOutOfRangeError, Policy, Skip, plan, retained

pytestmark = pytest.mark.unit

TPS = st.builds(TopicPartition, st.sampled_from(["a", "b"]), st.integers(0, 5))


@st.composite
def partition_state(draw: st.DrawFn) -> tuple[Watermarks, int | None]:
    low = draw(st.integers(0, 10_000))
    high = draw(st.integers(low, low + 10_000))
    committed = draw(st.none() | st.integers(low, high))
    return Watermarks(low, high), committed


@st.composite
def cluster(draw: st.DrawFn) -> tuple[dict[TopicPartition, Watermarks], dict[TopicPartition, int]]:
    states = draw(st.dictionaries(TPS, partition_state(), min_size=1, max_size=8))
    marks = {tp: m for tp, (m, _) in states.items()}
    committed = {tp: c for tp, (_, c) in states.items() if c is not None}
    return marks, committed


def policy(cap: int, starting: StartingOffsets = StartingOffsets.EARLIEST) -> Policy:
    return Policy(starting, OnOffsetOutOfRange.FAIL, cap)


@given(cluster(), st.integers(1, 3_000), st.sampled_from(list(StartingOffsets)))
def test_ranges_start_at_checkpoint_and_respect_cap_and_watermarks(
    state: tuple[dict[TopicPartition, Watermarks], dict[TopicPartition, int]],
    cap: int,
    starting: StartingOffsets,
) -> None:
    marks, committed = state
    result = plan(committed, marks, policy(cap, starting))
    latest = starting is StartingOffsets.LATEST and not committed
    for item in result.ranges:
        expected_start = committed.get(
            item.tp, marks[item.tp].high if latest else marks[item.tp].low
        )
        assert item.start == expected_start
        assert marks[item.tp].low <= item.start < item.end <= marks[item.tp].high
        assert item.count <= cap
        assert result.positions[item.tp] == item.end


@given(cluster(), st.integers(1, 3_000))
def test_repeated_batches_read_every_offset_exactly_once(
    state: tuple[dict[TopicPartition, Watermarks], dict[TopicPartition, int]], cap: int
) -> None:
    marks, committed = state
    positions: dict[TopicPartition, int] = dict(committed)
    read: dict[TopicPartition, list[tuple[int, int]]] = {tp: [] for tp in marks}
    for _ in range(10_000 // cap + 2):
        result = plan(positions, marks, policy(cap))
        for item in result.ranges:
            read[item.tp].append((item.start, item.end))
        positions = dict(result.positions)
        if not result.ranges:
            break
    for tp, spans in read.items():
        first = committed.get(tp, marks[tp].low)
        covered = [o for start, end in spans for o in range(start, end)]
        assert covered == list(range(first, marks[tp].high))
        assert positions[tp] == marks[tp].high


@given(cluster())
def test_nothing_new_means_no_batch(
    state: tuple[dict[TopicPartition, Watermarks], dict[TopicPartition, int]],
) -> None:
    marks, _ = state
    at_end = {tp: m.high for tp, m in marks.items()}
    result = plan(at_end, marks, policy(100))
    assert result.ranges == ()
    assert result.positions == at_end


def test_partition_outside_the_watermarks_keeps_its_position() -> None:
    gone = TopicPartition("old", 0)
    result = plan({gone: 7}, {TopicPartition("new", 0): Watermarks(0, 3)}, policy(10))
    assert result.positions[gone] == 7


@given(st.integers(1, 1_000), st.integers(1, 1_000))
def test_retention_past_checkpoint_fails_by_default(committed: int, lost: int) -> None:
    tp = TopicPartition("events", 3)
    marks = Watermarks(committed + lost, committed + lost + 5)
    with pytest.raises(OffsetOutOfRangeError, match="events/3") as err:
        plan({tp: committed}, {tp: marks}, policy(10))
    assert str(committed) in str(err.value)


@given(st.integers(1, 1_000), st.integers(1, 1_000))
def test_retention_past_checkpoint_skips_when_asked(committed: int, lost: int) -> None:
    tp = TopicPartition("events", 3)
    marks = Watermarks(committed + lost, committed + lost + 5)
    skipping = Policy(StartingOffsets.EARLIEST, OnOffsetOutOfRange.EARLIEST, 10)
    result = plan({tp: committed}, {tp: marks}, skipping)
    assert [s.count for s in result.skips] == [lost]
    assert result.ranges[0].start == marks.low


def test_latest_starts_new_partitions_at_the_end_and_records_it() -> None:
    tp = TopicPartition("events", 0)
    result = plan({}, {tp: Watermarks(0, 500)}, policy(10, StartingOffsets.LATEST))
    assert result.ranges == ()
    assert result.positions == {tp: 500}


def test_starting_offsets_place_a_new_pipeline_and_later_partitions_start_at_earliest() -> None:
    """Issue 12 item 3. Reproduction: under ``startingOffsets: latest`` a partition
    added to a running pipeline's topic started at its high watermark, so the records
    produced into it between its creation and the next plan were never read (0 of 300
    on the local Kafka, with no log line and no metric)."""
    t0, t1, t2 = (TopicPartition("t", p) for p in range(3))
    marks = {t0: Watermarks(0, 100), t1: Watermarks(0, 40), t2: Watermarks(5, 300)}
    latest = policy(1_000, StartingOffsets.LATEST)

    fresh = plan({}, marks, latest)
    assert fresh.ranges == ()
    assert fresh.positions == {t0: 100, t1: 40, t2: 300}
    assert fresh.added == ()

    grown = plan({t0: 100, t1: 40}, marks, latest)
    assert grown.ranges == (OffsetRange(t2, 5, 300),)
    assert grown.added == (t2,)


@given(st.integers(1, 1_000), st.integers(0, 1_000))
def test_a_checkpoint_beyond_the_end_fails_by_default_naming_it(committed: int, held: int) -> None:
    """The topic was deleted and recreated (or truncated): its end is below the
    checkpoint. Before, the message spoke of retention only."""
    tp = TopicPartition("events", 3)
    marks = Watermarks(0, max(0, committed - 1 - held))
    with pytest.raises(OffsetOutOfRangeError, match="events/3") as err:
        plan({tp: committed}, {tp: marks}, policy(10))
    assert f"committed offset {committed} is beyond the end offset {marks.high}" in str(err.value)
    assert "recreated" in str(err.value)


def test_a_checkpoint_beyond_the_end_resumes_at_the_earliest_offset_when_asked() -> None:
    tp = TopicPartition("events", 0)
    skipping = Policy(StartingOffsets.EARLIEST, OnOffsetOutOfRange.EARLIEST, 10)
    result = plan({tp: 200}, {tp: Watermarks(0, 30)}, skipping)
    assert [(s.committed, s.resumed_at, s.beyond_end, s.count) for s in result.skips] == [
        (200, 0, True, 0)
    ]
    assert result.ranges == (OffsetRange(tp, 0, 10),)


def test_a_planned_range_past_the_partitions_end_is_lost_whole_and_its_batch_keeps_the_rest() -> (
    None
):
    recreated, fine = TopicPartition("events", 0), TopicPartition("events", 1)
    ranges = (OffsetRange(recreated, 100, 150), OffsetRange(fine, 10, 20))
    marks = {recreated: Watermarks(0, 120), fine: Watermarks(0, 40)}
    kept, lost = retained(ranges, marks)
    assert kept == (OffsetRange(fine, 10, 20),)
    assert lost == (Skip(recreated, 100, 150),)
    assert lost[0].count == 50
    assert not lost[0].beyond_end
