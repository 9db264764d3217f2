"""The unique-visitors example's tests (``sluice_job.examples.unique_visitors``): its
sink table, its state in versions 1 and 2, and the oracle that checks every window
against the distinct users of its events (driver-level and on real nodes)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from sluice_dev.events import EventFactory
from tests.support import expected, state

WINDOW_S = 10
TABLE = """CREATE TABLE {keyspace}.page_visitors (page text, window_start timestamp,
    visitors int, views bigint, PRIMARY KEY ((page), window_start))"""
STATE_V1: dict[str, Any] = {
    "name": "visitors",
    "table": "page_window_visitors",
    "key": [{"name": "page", "type": "text"}, {"name": "window_start", "type": "timestamp"}],
    "columns": [{"name": "users", "type": "set<text>"}],
    "window": {"start": "window_start", "sizeSeconds": WINDOW_S},
}
STATE_V2 = {**STATE_V1, "columns": [*STATE_V1["columns"], {"name": "views", "type": "bigint"}]}
FLUSH = 100_000
"""An event 1,000 s of event time after the others: its watermark closes their windows."""


def window_of(at: datetime) -> datetime:
    seconds = int(at.replace(tzinfo=UTC).timestamp())
    return datetime.fromtimestamp(seconds - seconds % WINDOW_S, UTC).replace(tzinfo=None)


def assert_visitors_exact(
    cassandra: Any,
    keyspace: str,
    bootstrap: str,
    topics: tuple[str, str],
    factory: EventFactory,
    count: int,
    upgrade_seq: int | None = None,
) -> None:
    """Every window of ``page_visitors`` holds the distinct users of events ``0 ..
    count - 1`` but the dead-lettered (late) ones; the windows that start at or after
    event ``upgrade_seq`` (default: half of ``count``), which version 2 saw whole, hold
    their exact views, the others none. ``topics``: the source and dead-letter topics."""
    topic, letters_topic = topics
    late_seqs = state.dead_letter_seqs(bootstrap, topic, letters_topic)
    users: dict[tuple[str, datetime], set[str]] = defaultdict(set)
    views: dict[tuple[str, datetime], int] = defaultdict(int)
    for seq in range(count):
        if seq in late_seqs:
            continue
        _, _, page, action, user, at = expected.event_row(factory, seq)
        users[(page, window_of(at))].add(user)
        views[(page, window_of(at))] += action == "view"
    written = {
        (r.page, r.window_start): (r.visitors, r.views)
        for r in cassandra.execute(f"SELECT * FROM {keyspace}.page_visitors")
    }
    print(f"windows written: {len(written)}; late records: {len(late_seqs)}")
    assert {k: v[0] for k, v in written.items()} == {k: len(u) for k, u in users.items()}
    upgrade_at = window_of(expected.event_row(factory, upgrade_seq or count // 2)[5])
    for (page, start), (_, counted) in written.items():
        if start >= upgrade_at:  # windows version 2 saw whole
            assert counted == views[(page, start)], (page, start)
        else:  # closed by version 1, or opened by it: no views, or only those v2 saw
            assert counted is None, (page, start, counted)
