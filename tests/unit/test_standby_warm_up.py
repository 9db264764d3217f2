"""The standby's warm-up (``standby.warm_read``) is best effort: whatever fails, it
returns 0 and says which step it skipped, and the standby goes on to say ready. What
it reads again (``standby.warm_ranges``): the last committed records of each partition,
never below what Kafka still retains."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sluice_job import standby
from sluice_job.offsets import OffsetRange, TopicPartition

pytestmark = pytest.mark.unit

TP = TopicPartition("events", 0)
TP1, TP2 = TopicPartition("events", 1), TopicPartition("events", 2)


class NoKafka:
    """A SparkSession whose Kafka read fails as retention or an outage makes it."""

    @property
    def read(self) -> Any:
        raise RuntimeError("offsets out of range")


class NeverWrites:
    def write(self, frame: Any, version: int, *, dry: bool = False) -> int:
        raise AssertionError("the warm-up reached the sink")


def test_nothing_committed_yet_means_nothing_to_warm() -> None:
    assert standby.warm_read(NoKafka(), {}, {TP: 0}, lambda r, o: r, {}, NeverWrites()) == 0  # type: ignore[arg-type]


def test_a_failed_read_is_logged_as_skipped_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="sluice_job")

    warmed = standby.warm_read(NoKafka(), {}, {TP: 7}, lambda r, o: r, {}, NeverWrites())  # type: ignore[arg-type]

    assert warmed == 0
    (record,) = [r for r in caplog.records if r.getMessage() == "standby warm-up read skipped"]
    fields = record.fields  # type: ignore[attr-defined]
    assert fields["step"] == "read"
    assert "offsets out of range" in fields["message"]


def test_the_warm_up_reads_the_last_committed_records_of_each_partition() -> None:
    positions = {TP: 1_000, TP1: 20, TP2: 0}

    ranges = standby.warm_ranges(positions, {TP: 0, TP1: 0, TP2: 0}, records=50)

    assert ranges == [OffsetRange(TP, 950, 1_000), OffsetRange(TP1, 0, 20)]


def test_the_warm_up_never_reads_below_what_kafka_retains() -> None:
    """Retention deleted offsets 0-979 of partition 0 and everything committed of
    partition 1: a read below the oldest retained offset would fail the warm-up."""
    positions = {TP: 1_000, TP1: 300}

    ranges = standby.warm_ranges(positions, {TP: 980, TP1: 300}, records=50)

    assert ranges == [OffsetRange(TP, 980, 1_000)]


def test_a_watermark_fetch_that_fails_skips_the_warm_up_without_reading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="sluice_job")

    def lows() -> dict[TopicPartition, int]:
        raise RuntimeError("Kafka at kafka:9092: timed out")

    warmed = standby.warm_read(
        NoKafka(),  # type: ignore[arg-type]
        {},
        {TP: 7},
        lambda r, o: r,
        {},
        NeverWrites(),  # type: ignore[arg-type]
        lows=lows,
    )

    assert warmed == 0
    (record,) = [r for r in caplog.records if r.getMessage() == "standby warm-up read skipped"]
    assert record.fields["step"] == "watermarks"  # type: ignore[attr-defined]


class Store:
    """The checkpoint as a standby reads it: the last committed positions."""

    def load(self, *, serial: bool = False) -> Any:
        return type("Row", (), {"positions": {TP: 100}})()


def get_ready(
    monkeypatch: pytest.MonkeyPatch,
    promoted: threading.Event,
    check: Callable[..., object],
    warm_read: Callable[..., int],
) -> Callable[[], int]:
    """``standby.get_ready`` of a hot standby with ``check`` and ``warm_read`` in place
    of the Spark jobs."""
    monkeypatch.setattr(standby, "empty_records", lambda spark: None)
    monkeypatch.setattr(standby, "warming", lambda spark: contextlib.nullcontext())
    monkeypatch.setattr(standby, "check", check)
    monkeypatch.setattr(standby, "warm_read", warm_read)
    return standby.get_ready(
        pipeline="ns/p",
        epoch=5,
        spark=None,  # type: ignore[arg-type]
        function=lambda r, o: r,
        options={},
        sink=None,
        kafka_config={},
        store=Store(),  # type: ignore[arg-type]
        promoted=promoted,
    )


@pytest.mark.parametrize(
    ("promoted_at", "steps"),
    [
        ("never", ["check", "warm", "warm"]),
        ("during the first warm-up", ["check", "warm"]),
        ("before it began", []),
    ],
)
def test_a_hot_standby_promoted_while_it_gets_ready_skips_what_is_left_of_it(
    monkeypatch: pytest.MonkeyPatch, promoted_at: str, steps: list[str]
) -> None:
    """Issue 43, item 3: a standby still getting ready when its driver is lost is
    promoted, but it claimed only once its whole check and warm-up were done, 16-48 s
    on two cores, longer than a cold driver takes to claim and commit. Promoted, it
    now says ready at the next step and claims."""
    promoted, done = threading.Event(), []
    if promoted_at == "before it began":
        promoted.set()

    def warm_read(*_: Any) -> int:
        done.append("warm")
        if promoted_at == "during the first warm-up":
            promoted.set()
        return 5

    get_ready(monkeypatch, promoted, lambda *_: done.append("check"), warm_read)
    assert standby.WARM_UP_RUNS == 2
    assert done == steps


@pytest.mark.parametrize("promoted", [False, True])
def test_a_check_that_fails_fails_the_standby_unless_a_promotion_cut_it_short(
    monkeypatch: pytest.MonkeyPatch, promoted: bool
) -> None:
    """A promotion cancels the check's Spark jobs (``cancel_warm_up_on``), and the
    check then fails: a promoted standby goes on to claim (the running spec's driver
    passed the check), one not promoted still exits 2 on a failed check."""
    event = threading.Event()

    def check(*_: Any) -> None:
        if promoted:
            event.set()
        raise standby.StandbyCheckError("Job 3 cancelled part of cancelled job tag")

    if promoted:
        assert callable(get_ready(monkeypatch, event, check, lambda *_: 5))
    else:
        with pytest.raises(standby.StandbyCheckError, match="cancelled"):
            get_ready(monkeypatch, event, check, lambda *_: 5)
