"""What the sink must hold for produced events: the transform's rules restated in
plain Python, independently of the Spark code under test."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sluice_dev.events import EventFactory, normalised_page

page = normalised_page


def event_row(factory: EventFactory, seq: int) -> tuple[str, int, str, str, str, datetime]:
    event = factory.event(seq)
    return (
        str(event["event_id"]),
        seq,
        page(str(event["page"])),
        str(event["action"]).lower(),
        str(event["user_id"]),
        datetime.fromtimestamp(int(str(event["ts"])) / 1000, UTC).replace(tzinfo=None),
    )


def mismatched_events(rows: Mapping[str, Any], factory: EventFactory, count: int) -> list[int]:
    """The sequence numbers of events ``0 .. count-1`` whose row in ``rows`` (by event
    id, as ``tests.support.state.events`` reads the events table) is missing or not
    what the events transform makes of the event: empty when every event is there
    with the right content."""
    wrong = []
    for seq in range(count):
        want = event_row(factory, seq)
        row = rows.get(want[0])
        got = None
        if row is not None:
            got = (row.event_id, row.seq, row.page, row.action, row.user_id, row.event_time)
        if got != want:
            wrong.append(seq)
    return wrong


EVENT_FIELDS = (
    ("event_id", False, True),
    ("seq", True, False),
    ("page", False, True),
    ("action", False, True),
    ("user_id", False, False),
    ("ts", True, True),
)
"""(name, must be an integer, required), as ``ui_events`` documents them."""
INT64 = range(-(2**63), 2**63)


def reject_reason(value: bytes | None) -> str | None:
    """Why the example transform must reject ``value``, or ``None`` if it is valid:
    the documented rules of ``ui_events`` restated in plain Python."""
    if value is None:
        return "no value"
    try:
        document = json.loads(value)
    except ValueError:
        return "malformed JSON"
    if not isinstance(document, dict):
        return "not a JSON object"
    for name, integer, required in EVENT_FIELDS:
        found = document.get(name)
        if found is None and required:
            return f"missing field {name}"
        if found is not None and integer and json_type(found) != "integer":
            return f"wrong type of {name}: expected integer, got {json_type(found)}"
    return None


def json_type(value: object) -> str:
    """The JSON type of a parsed value; integers beyond 64 bits count as numbers."""
    if isinstance(value, bool):  # before int: True is an int in Python
        return "boolean"
    if isinstance(value, int):
        return "integer" if value in INT64 else "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
