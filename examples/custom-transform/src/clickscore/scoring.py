"""The rules for one click event, in plain Python: testable without Spark, and run by
the transform inside Spark's Python workers (the executors), which therefore import
this package from the image.

An event is a JSON object such as::

    {"event_id": "e-1", "user_id": "u-3", "page": "/Cart/?ref=ad", "action": "click",
     "ts": 1763780400123}

``event_id``, ``page``, ``action`` (strings) and ``ts`` (milliseconds since the
epoch, an integer) are required; ``user_id`` is optional. A valid event is scored by
the weight of its action; the page is normalised (lower case, no query string or
trailing slash). Anything else is rejected with the first reason that applies:
``no value``, ``malformed JSON``, ``not a JSON object``, ``missing field <name>``,
``wrong type of <name>: expected <type>, got <type>``, ``unknown action <action>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final, NamedTuple

DEFAULT_WEIGHTS: Final = {"view": 1, "click": 5, "scroll": 0}
REQUIRED_TEXT: Final = ("event_id", "page", "action")


class Verdict(NamedTuple):
    """A scored event (``reason`` is ``None``) or a rejected one (only ``reason``)."""

    event_id: str | None = None
    user_id: str | None = None
    page: str | None = None
    action: str | None = None
    score: int | None = None
    ts: int | None = None
    reason: str | None = None


def judge(value: bytes | bytearray | None, weights: Mapping[str, int]) -> Verdict:
    """Score the record's value, or say why it is rejected."""
    if value is None:
        return Verdict(reason="no value")
    try:
        event = json.loads(value)
    except ValueError:  # also undecodable bytes
        return Verdict(reason="malformed JSON")
    if not isinstance(event, dict):
        return Verdict(reason="not a JSON object")
    problem = _problem(event)
    if problem is not None:
        return Verdict(reason=problem)
    action = event["action"].strip().lower()
    if action not in weights:
        return Verdict(reason=f"unknown action {action}")
    user = event.get("user_id")
    return Verdict(
        event_id=event["event_id"],
        user_id=None if user is None else str(user),
        page=normalised_page(event["page"]),
        action=action,
        score=int(weights[action]),
        ts=event["ts"],
    )


def normalised_page(page: str) -> str:
    """``/Cart/?ref=ad`` -> ``/cart``: lower case, no query or fragment, no trailing slash."""
    cleaned = re.sub(r"/+$", "", re.sub(r"[?#].*$", "", page.strip().lower()))
    return cleaned or "/"


def _problem(event: Mapping[str, object]) -> str | None:
    for name in REQUIRED_TEXT:
        found = event.get(name)
        if found is None:
            return f"missing field {name}"
        if not isinstance(found, str):
            return f"wrong type of {name}: expected string, got {json_type(found)}"
    ts = event.get("ts")
    if ts is None:
        return "missing field ts"
    if json_type(ts) != "integer":
        return f"wrong type of ts: expected integer, got {json_type(ts)}"
    return None


def json_type(value: object) -> str:
    """The JSON type name of a parsed value."""
    if isinstance(value, bool):  # before int: True is an int in Python
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
