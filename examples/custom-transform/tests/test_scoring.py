"""The rules of one event, in plain Python: no Spark needed."""

from __future__ import annotations

import pytest
from clickscore.scoring import DEFAULT_WEIGHTS, Verdict, judge, normalised_page

CLICK = (
    b'{"event_id": "e-1", "user_id": "u-3", "page": "/Cart/?ref=ad", "action": "CLICK", "ts": 5}'
)


def test_a_click_is_scored_by_its_weight_on_its_normalised_page() -> None:
    assert judge(CLICK, DEFAULT_WEIGHTS) == Verdict("e-1", "u-3", "/cart", "click", 5, 5, None)


def test_weights_come_from_the_caller() -> None:
    assert judge(CLICK, {"click": 7}).score == 7


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "no value"),
        (b"{not json", "malformed JSON"),
        (b"\xff\xfe", "malformed JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"page": "/", "action": "view", "ts": 1}', "missing field event_id"),
        (b'{"event_id": "e", "action": "view", "ts": 1}', "missing field page"),
        (
            b'{"event_id": 3, "page": "/", "action": "view", "ts": 1}',
            "wrong type of event_id: expected string, got integer",
        ),
        (b'{"event_id": "e", "page": "/", "action": "view"}', "missing field ts"),
        (
            b'{"event_id": "e", "page": "/", "action": "view", "ts": "yesterday"}',
            "wrong type of ts: expected integer, got string",
        ),
        (
            b'{"event_id": "e", "page": "/", "action": "view", "ts": true}',
            "wrong type of ts: expected integer, got boolean",
        ),
        (b'{"event_id": "e", "page": "/", "action": "buy", "ts": 1}', "unknown action buy"),
    ],
)
def test_a_bad_record_is_rejected_with_the_first_reason_that_applies(
    value: bytes | None, reason: str
) -> None:
    assert judge(value, DEFAULT_WEIGHTS) == Verdict(reason=reason)


@pytest.mark.parametrize(
    ("page", "normalised"), [("/Home", "/home"), ("/cart//", "/cart"), ("/?x=1", "/"), ("", "/")]
)
def test_pages_are_normalised(page: str, normalised: str) -> None:
    assert normalised_page(page) == normalised
