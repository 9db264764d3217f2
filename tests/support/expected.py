"""What the sink must hold for produced events: the transform's rules restated in
plain Python, independently of the Spark code under test."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sluice_dev.events import EventFactory


def page(raw: str) -> str:
    cleaned = re.sub(r"/+$", "", re.sub(r"[?#].*$", "", raw.strip().lower()))
    return cleaned or "/"


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
