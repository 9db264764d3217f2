"""The unique-visitors example (``sluice_job.examples.unique_visitors``, issue 41 item
4) with the real driver: distinct users per page and 10-second window, each window's
row written once when the watermark passes it, exact through a driver killed between
its writes and its commit, a driver frozen in a batch and fenced once its successor
went on, and an upgrade to version 2, whose state and output add the window's views.
Records behind the watermark (if the partitions' event times drift apart by more
than the lateness) are dead letters, and the oracle leaves them out."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import expected, state
from tests.support.driver import Driver, drain_and_stop, kill_then_fence, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

PARTITIONS = 4
CAP = 150
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


def test_distinct_visitors_per_window_are_exact_through_a_kill_a_zombie_and_an_upgrade(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver: Driver,
) -> None:
    cassandra.execute(TABLE.format(keyspace=cassandra_keyspace))
    topic, letters_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    factory = EventFactory(seed=43)
    produce(kafka_bootstrap, topic, 3_000, factory=factory)
    v1 = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        table="page_visitors",
        entrypoint="sluice_job.examples.unique_visitors:transform",
        cap=CAP,
        deadLetter={"kafka": {"topic": letters_topic}},
    )
    v1["transform"]["eventTime"] = {"allowedLatenessSeconds": 5}
    v1["transform"]["state"] = [STATE_V1]
    key = driver.checkpoint_key

    zombie, successor, _ = kill_then_fence(driver, v1, cassandra, cassandra_keyspace)
    # fenced: at its commit, or before, by the state its successor moved on
    assert zombie.wait(300) == 3
    assert zombie.message()["reason"] == "Fenced"
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(successor, cassandra, cassandra_keyspace, key, ends, timeout=600)

    produce(kafka_bootstrap, topic, 3_000, start=3_000, factory=factory)
    produce(kafka_bootstrap, topic, 1, start=FLUSH, factory=factory)
    v2 = {**v1, "transform": {**v1["transform"]}}
    v2["transform"]["entrypoint"] = "sluice_job.examples.unique_visitors:transform_v2"
    v2["transform"]["state"] = [STATE_V2]
    upgraded = driver.start(v2, 4)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(upgraded, cassandra, cassandra_keyspace, key, ends, timeout=600)

    late = {
        (int(m.headers["sluice.source.partition"]), int(m.headers["sluice.source.offset"]))
        for m in state.read_topic(kafka_bootstrap, letters_topic)
    }
    source = state.read_topic(kafka_bootstrap, topic)
    late_seqs = {json.loads(r.value)["seq"] for r in source if (r.partition, r.offset) in late}
    users: dict[tuple[str, datetime], set[str]] = defaultdict(set)
    views: dict[tuple[str, datetime], int] = defaultdict(int)
    for seq in range(6_000):
        if seq in late_seqs:
            continue
        _, _, page, action, user, at = expected.event_row(factory, seq)
        users[(page, window_of(at))].add(user)
        views[(page, window_of(at))] += action == "view"
    written = {
        (r.page, r.window_start): (r.visitors, r.views)
        for r in cassandra.execute(f"SELECT * FROM {cassandra_keyspace}.page_visitors")
    }
    print(f"windows written: {len(written)}; late records: {len(late_seqs)}")
    assert {k: v[0] for k, v in written.items()} == {k: len(u) for k, u in users.items()}
    upgrade_at = window_of(expected.event_row(factory, 3_000)[5])
    for (page, start), (_, counted) in written.items():
        if start >= upgrade_at:  # windows version 2 saw whole
            assert counted == views[(page, start)], (page, start)
        else:  # closed by version 1, or opened by it: no views, or only those v2 saw
            assert counted is None, (page, start, counted)
