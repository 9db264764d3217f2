"""``sluice_job.testing``: a transform tested on sample records, with no server, as a
user's plain pytest would (issue 14 item 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice_job import testing
from sluice_job.transform import NondeterministicTransformError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

EVENT = {
    "event_id": "e-1",
    "seq": 1,
    "page": "/Home/?ref=ad",
    "action": "CLICK",
    "user_id": "u-3",
    "ts": 1_763_780_400_123,
}


def test_the_events_example_gives_a_cleaned_row_and_rejects_with_reasons(
    spark_session: Any,
) -> None:
    result = testing.run(
        "sluice_job.examples.events:transform",
        [
            {"key": "k-1", "value": EVENT},
            "not json",
            {"value": {**EVENT, "event_id": "e-2", "page": None}},
        ],
        topic="ui-events",
        spark=spark_session,
    )
    [row] = result.output
    assert (row["event_id"], row["page"], row["action"]) == ("e-1", "/home", "click")
    assert (row["source_topic"], row["source_partition"], row["source_offset"]) == (
        "ui-events",
        0,
        0,
    )
    assert [(r["offset"], r["reason"]) for r in result.rejects] == [
        (1, "malformed JSON"),
        (2, "missing field page"),
    ]
    assert result.rejects[0]["value"] == b"not json"


def test_sample_records_come_from_a_json_lines_file(spark_session: Any, tmp_path: Path) -> None:
    sample = tmp_path / "events.jsonl"
    lines = [{"value": {**EVENT, "event_id": f"e-{n}", "seq": n}, "partition": 3} for n in (5, 6)]
    sample.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = testing.run(
        "sluice_job.examples.events:transform", testing.read_jsonl(sample), spark=spark_session
    )
    assert sorted((r["event_id"], r["source_partition"]) for r in result.output) == [
        ("e-5", 3),
        ("e-6", 3),
    ]
    assert result.rejects == []


def test_a_transform_the_driver_would_refuse_is_refused_here_too(spark_session: Any) -> None:
    with pytest.raises(NondeterministicTransformError, match=r"spec\.transform\.entrypoint"):
        testing.run(
            "tests.support.transforms:coin_flip",
            [{"value": EVENT}],
            {"tag": "t"},
            spark=spark_session,
        )
