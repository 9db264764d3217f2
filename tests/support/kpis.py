"""The KPI example's table and what it must sum to, restated in plain Python.

``sluice_job.examples.kpi`` writes one partial row per (page, window, batch); a
window's KPI is the sum of its rows. A user checks the sums: every valid event
counted exactly once, whatever was redelivered, re-run or fenced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sluice_dev.events import EventFactory
from tests.support import expected

TABLE = """CREATE TABLE {keyspace}.page_kpis (page text, window_start timestamp,
    batch_id bigint, views bigint, clicks bigint, events bigint,
    PRIMARY KEY ((page, window_start), batch_id))"""

Key = tuple[str, datetime]


def expected_sums(
    factory: EventFactory, seqs: Iterable[int], window: int = 60
) -> dict[Key, tuple[int, int, int]]:
    """(views, clicks, events) per (page, window start) for the valid events of ``seqs``."""
    views: Counter[Key] = Counter()
    clicks: Counter[Key] = Counter()
    events: Counter[Key] = Counter()
    for seq in seqs:
        if factory.is_bad(seq):
            continue
        _, _, page, action, _, at = expected.event_row(factory, seq)
        seconds = int(at.replace(tzinfo=UTC).timestamp())
        key = (page, datetime.fromtimestamp(seconds - seconds % window, UTC).replace(tzinfo=None))
        events[key] += 1
        views[key] += action == "view"
        clicks[key] += action == "click"
    return {k: (views[k], clicks[k], events[k]) for k in events}


def sums(session: Any, keyspace: str) -> dict[Key, tuple[int, int, int]]:
    """The table's sums per (page, window start), as a user queries them."""
    totals: dict[Key, tuple[int, int, int]] = {}
    for row in session.execute(f"SELECT * FROM {keyspace}.page_kpis", timeout=120):
        key = (row.page, row.window_start)
        v, c, e = totals.get(key, (0, 0, 0))
        totals[key] = (v + row.views, c + row.clicks, e + row.events)
    return totals
