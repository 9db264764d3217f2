"""The example transform's verdicts, record by record, against its documented rules
restated in plain Python (``tests.support.expected.reject_reason``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_job.examples.ui_events import clean
from tests.support import expected

pytestmark = pytest.mark.integration

VALID = {"event_id": "e-1", "page": "/home", "action": "view", "ts": 1_763_780_400_000}


def event(**changes: Any) -> bytes:
    document = {**VALID, **changes}
    return json.dumps({k: v for k, v in document.items() if v is not ...}).encode()


VALUES: list[bytes | None] = [
    event(),
    event(seq=3, user_id="u-1"),
    event(seq=None, user_id=None),  # optional fields may be null
    event(event_id=17),  # text fields take any JSON value, as its text
    None,
    b"",
    b"{not json",
    b"[1, 2]",
    b'"just a string"',
    event(page=...),
    event(action=None),
    event(ts="yesterday"),
    event(ts=1.5),
    event(ts=True),
    event(ts=2**64),
    event(seq="7"),
    event(event_id=..., ts="x"),  # the first broken rule is reported
    *(EventFactory(seed=4, bad_every=3).record(seq)[1] for seq in range(12)),
]


def test_each_record_is_either_an_event_or_a_reject_with_the_documented_reason(
    spark_session: Any,
) -> None:
    rows = [(b"k", value, "t", 0, offset, 1) for offset, value in enumerate(VALUES)]
    records = spark_session.createDataFrame(
        rows, "key binary, value binary, topic string, partition int, offset long, batch_id long"
    )
    result = clean(records)
    assert result.rejects is not None
    reasons = {row.offset: row.reason for row in result.rejects.collect()}
    kept = {row.source_offset for row in result.output.collect()}
    for offset, value in enumerate(VALUES):
        assert reasons.get(offset) == expected.reject_reason(value), value
        assert (offset in kept) == (offset not in reasons), value
    texts = {row.source_offset: row.event_id for row in result.output.collect()}
    assert texts[3] == "17"
