"""The standby's warm-up (``standby.warm_read``) is best effort: whatever fails, it
returns 0 and says which step it skipped, and the standby goes on to say ready."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sluice_job import standby
from sluice_job.offsets import TopicPartition

pytestmark = pytest.mark.unit

TP = TopicPartition("events", 0)


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
