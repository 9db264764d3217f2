"""The sessions example (``sluice_job.examples.sessions``, issue 41 item 4) with the
real driver: each user's sessions (events less than the gap apart in event time),
each row written once when the watermark passes its last event plus the gap, exact
through a driver killed between its writes and its commit, a driver frozen in a
batch and fenced once its successor went on, and an upgrade to version 2, whose
state and output add the session's distinct pages. Records behind the watermark are
dead letters, and the oracle leaves them out."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import expected, state
from tests.support.driver import Driver, kill_zombie_then_upgrade, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 4
CAP = 150
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


def test_sessions_are_exact_through_a_kill_a_zombie_and_an_upgrade(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver: Driver,
) -> None:
    cassandra.execute(TABLE.format(keyspace=cassandra_keyspace))
    topic, letters_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    factory = EventFactory(seed=47, events_per_second=1)
    produce(kafka_bootstrap, topic, 3_000, factory=factory)
    v1 = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        table="user_sessions",
        entrypoint="sluice_job.examples.sessions:transform",
        cap=CAP,
        deadLetter={"kafka": {"topic": letters_topic}},
    )
    v1["transform"]["eventTime"] = {"allowedLatenessSeconds": LATENESS_S}
    v1["transform"]["state"] = [STATE_V1]

    def second_half() -> None:
        produce(kafka_bootstrap, topic, 3_000, start=3_000, factory=factory)
        produce(kafka_bootstrap, topic, 1, start=FLUSH, factory=factory)

    v2 = {"entrypoint": "sluice_job.examples.sessions:transform_v2", "state": [STATE_V2]}
    faults = (kafka_bootstrap, topic, PARTITIONS)
    kill_zombie_then_upgrade(driver, v1, v2, cassandra, cassandra_keyspace, faults, second_half)

    late_seqs = state.dead_letter_seqs(kafka_bootstrap, topic, letters_topic)
    by_user: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
    for seq in range(6_000):
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
        for r in cassandra.execute(f"SELECT * FROM {cassandra_keyspace}.user_sessions")
    }
    print(f"sessions written: {len(written)}; late records: {len(late_seqs)}")
    assert {k: v[:2] for k, v in written.items()} == {k: v[:2] for k, v in want.items()}
    upgrade_at = expected.event_row(factory, 3_000)[5]
    whole = 0
    for session, (_, _, pages) in written.items():
        true_pages = want[session][2]
        if session[1] >= upgrade_at:  # sessions version 2 saw whole
            whole += 1
            assert set(pages or ()) == true_pages, session
        else:  # opened by version 1: no pages, or only those v2 saw
            assert pages is None or set(pages) <= true_pages, session
    assert whole > 100, "the upgrade is tested on sessions version 2 saw whole"
