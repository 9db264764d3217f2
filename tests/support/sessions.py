"""The sessions example's tests (``sluice_job.examples.sessions``): its sink table,
its state in versions 1 and 2, and the oracle that checks every session against
those of its user's events (driver-level and on real nodes)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from sluice_dev.events import EventFactory
from tests.support import expected, state

GAP_S = 600
"""Ten minutes: at one event a second over 500 users, a user's events are 500 s
apart on average, so most users have several sessions in the test's 100 minutes."""
LATENESS_S = 600
TABLE = """CREATE TABLE {keyspace}.user_sessions (user_id text, session_start timestamp,
    session_end timestamp, events bigint, pages set<text>,
    PRIMARY KEY ((user_id), session_start))"""
STATE_V1: dict[str, Any] = {
    "name": "sessions",
    "table": "user_open_sessions",
    "key": [{"name": "user_id", "type": "text"}],
    "columns": [{"name": "events", "type": "bigint"}],
    "session": {"gapSeconds": GAP_S},
}
STATE_V2 = {**STATE_V1, "columns": [*STATE_V1["columns"], {"name": "pages", "type": "set<text>"}]}
FLUSH = 100_000
"""An event 94,000 s of event time after the others: its watermark closes their
sessions (its own stays open)."""


def sessions_of(events: list[tuple[datetime, str]]) -> list[tuple[datetime, datetime, set[str]]]:
    """A user's events (time, page) as sessions: (start, last event, pages)."""
    found: list[tuple[datetime, datetime, set[str]]] = []
    for at, page in sorted(events):
        if found and at - found[-1][1] < timedelta(seconds=GAP_S):
            start, _, pages = found[-1]
            found[-1] = (start, at, pages | {page})
        else:
            found.append((at, at, {page}))
    return found


def assert_sessions_exact(
    cassandra: Any,
    keyspace: str,
    bootstrap: str,
    topics: tuple[str, str],
    factory: EventFactory,
    count: int,
    upgrade_seq: int | None = None,
) -> None:
    """Every session of ``user_sessions`` is one of those events ``0 .. count - 1``
    (but the dead-lettered, late ones) make, with its last event and event count,
    and every such session is there; those that start at or after event
    ``upgrade_seq`` (default: half of ``count``), which version 2 saw whole, hold
    exactly their pages, the others none or only some. ``topics``: the source and
    dead-letter topics."""
    topic, letters_topic = topics
    late_seqs = state.dead_letter_seqs(bootstrap, topic, letters_topic)
    by_user: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
    for seq in range(count):
        if seq not in late_seqs:
            _, _, page, _, user, at = expected.event_row(factory, seq)
            by_user[user].append((at, page))
    want = {
        (user, start): (end, len([e for e in events if start <= e[0] <= end]), pages)
        for user, events in by_user.items()
        for start, end, pages in sessions_of(events)
    }
    written = {
        (r.user_id, r.session_start): (r.session_end, r.events, r.pages)
        for r in cassandra.execute(f"SELECT * FROM {keyspace}.user_sessions")
    }
    print(f"sessions written: {len(written)}; late records: {len(late_seqs)}")
    assert {k: v[:2] for k, v in written.items()} == {k: v[:2] for k, v in want.items()}
    upgrade_at = expected.event_row(factory, upgrade_seq or count // 2)[5]
    whole = 0
    for session, (_, _, pages) in written.items():
        true_pages = want[session][2]
        if session[1] >= upgrade_at:  # sessions version 2 saw whole
            whole += 1
            assert set(pages or ()) == true_pages, session
        else:  # opened by version 1: no pages, or only those v2 saw
            assert pages is None or set(pages) <= true_pages, session
    assert whole > 100, "the upgrade is tested on sessions version 2 saw whole"
