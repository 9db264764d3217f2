"""Where an offset reset moves the positions (``sluice_job.reset``), and the spec's
rules for it, as a user writing ``spec.offsetReset`` meets them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from sluice_api.offset_reset import OffsetReset
from sluice_job.offsets import TopicPartition, Watermarks
from sluice_job.reset import AppliedReset, ResetError, targets
from tests.support.observations import spec

pytestmark = pytest.mark.unit
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
MARKS = {A0: Watermarks(10, 100), A1: Watermarks(0, 50)}


def reset(**fields: Any) -> OffsetReset:
    return OffsetReset.model_validate({"id": "r1", **fields})


def test_earliest_and_latest_move_every_partition_of_the_source() -> None:
    current = {A0: 60, A1: 20, B0: 7}  # b is no longer a source topic: kept as it is
    assert targets(reset(to="Earliest"), current, MARKS) == {A0: 10, A1: 0, B0: 7}
    assert targets(reset(to="Latest"), current, MARKS) == {A0: 100, A1: 50, B0: 7}


def test_a_timestamp_goes_to_the_first_record_at_or_after_it_or_to_the_end() -> None:
    request = reset(to="Timestamp", timestamp="2026-11-24T00:00:00+01:00")
    assert request.epoch_millis() == 1_795_474_800_000
    moved = targets(request, {A0: 60, A1: 20}, MARKS, {A0: 42, A1: None})
    assert moved == {A0: 42, A1: 50}


def test_a_timestamp_older_than_retention_starts_at_the_oldest_record() -> None:
    request = reset(to="Timestamp", timestamp="2020-01-01T00:00:00Z")
    assert targets(request, {}, MARKS, {A0: 3, A1: 0}) == {A0: 10, A1: 0}


def test_explicit_offsets_move_only_the_partitions_named() -> None:
    request = reset(to="Offsets", offsets=[{"topic": "a", "partition": 1, "offset": 5}])
    assert targets(request, {A0: 60, A1: 20}, MARKS) == {A0: 60, A1: 5}


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ({"topic": "a", "partition": 0, "offset": 9}, r"offset 9 of a/0 is outside \[10, 100\]"),
        ({"topic": "a", "partition": 0, "offset": 101}, "offset 101 of a/0 is outside"),
        ({"topic": "a", "partition": 7, "offset": 0}, "a/7 is not a partition"),
    ],
)
def test_explicit_offsets_outside_what_kafka_holds_are_refused_naming_them(
    item: dict[str, Any], named: str
) -> None:
    with pytest.raises(ResetError, match=named):
        targets(reset(to="Offsets", offsets=[item]), {A0: 60}, MARKS)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"to": "Timestamp"}, "timestamp is set exactly when offsetReset.to is Timestamp"),
        ({"to": "Earliest", "timestamp": "2026-01-01T00:00:00Z"}, "timestamp is set exactly"),
        ({"to": "Offsets"}, "offsets is set exactly when offsetReset.to is Offsets"),
        ({"to": "Timestamp", "timestamp": "yesterday"}, "not an RFC 3339 time"),
        ({"to": "Timestamp", "timestamp": "2026-01-01T00:00:00"}, "needs a time zone"),
        (
            {"to": "Offsets", "offsets": [{"topic": "a", "partition": 0, "offset": 1}] * 2},
            "names a partition twice",
        ),
        ({"to": "Sideways"}, "to"),
    ],
)
def test_a_reset_that_does_not_say_where_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        reset(**fields)


def test_a_reset_naming_a_topic_the_pipeline_does_not_read_is_refused() -> None:
    elsewhere = {"topic": "elsewhere", "partition": 0, "offset": 0}
    with pytest.raises(ValidationError, match=r"names elsewhere, not in source\.kafka\.topics"):
        spec(offsetReset={"id": "r1", "to": "Offsets", "offsets": [elsewhere]})


def test_the_history_record_says_what_was_asked_by_whom_and_the_move() -> None:
    request = reset(to="Latest", reason="skip poison", requestedBy="bob")
    record = json.loads(AppliedReset(request, {A0: 60}, {A0: 100}).history_json())
    assert record == {
        "id": "r1",
        "to": "Latest",
        "reason": "skip poison",
        "requestedBy": "bob",
        "from": {"a": {"0": 60}},
        "positions": {"a": {"0": 100}},
    }
