"""An offset reset against the real broker and Cassandra (issue 15 item 3): a replay
from a time re-reads exactly the records since then, the new code's values replace
the old ones in the sink, the reset is a batch of its own in the history with who
and why, and a driver started again with the same spec does not apply it twice."""

from __future__ import annotations

import json
import signal
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

BEFORE, AFTER = 40, 30  # records produced before and after the replay's time


def next_millisecond() -> int:
    """A time no record produced so far carries: the clock has moved past it."""
    mark = int(time.time() * 1000) + 1
    wait_for(lambda: time.time() * 1000 > mark, timeout=5, what="the clock to pass a millisecond")
    return mark


def test_a_replay_from_a_time_rewrites_what_came_after_it_once_recorded_who_and_why(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=2)
    produce(kafka_bootstrap, topic, BEFORE, factory=EventFactory(seed=151))
    at_reset = state.end_offsets(kafka_bootstrap, topic, 2)
    boundary = next_millisecond()
    produce(kafka_bootstrap, topic, AFTER, factory=EventFactory(seed=152))
    ends = state.end_offsets(kafka_bootstrap, topic, 2)
    pipeline_id = driver.checkpoint_key
    common = dict(
        bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
    )

    first = driver.start(spec(**common, options={"tag": "v1"}), epoch=1)
    drain_and_stop(first, cassandra, events_table, pipeline_id, ends)
    old = state.tagged_cells(cassandra, events_table)
    assert len(old) == BEFORE + AFTER
    last_batch = state.checkpoint_row(cassandra, events_table, pipeline_id).batch_id

    when = datetime.fromtimestamp(boundary / 1000, UTC).isoformat(timespec="milliseconds")
    asked = {"id": "replay-1", "to": "Timestamp", "timestamp": when}
    asked |= {"reason": "v1 mis-tagged", "requestedBy": "alice"}
    replay = spec(**common, options={"tag": "v2"}, offsetReset=asked)
    second = driver.start(replay, epoch=2)

    def replayed() -> bool:
        tags = [tag for tag, _ in state.tagged_cells(cassandra, events_table).values()]
        return tags.count("v2") == AFTER

    wait_for(replayed, timeout=300, what="the records after the replay's time rewritten by v2")
    drain_and_stop(second, cassandra, events_table, pipeline_id, ends)

    new = state.tagged_cells(cassandra, events_table)
    rewritten = {key for key, (tag, _) in new.items() if tag == "v2"}
    assert len(rewritten) == AFTER, "exactly the records since the time were replayed"
    assert {tag for key, (tag, _) in new.items() if key not in rewritten} == {"v1"}
    assert min(new[key][1] for key in rewritten) > max(w for _, w in old.values())

    history = state.history(cassandra, events_table, pipeline_id)
    [moved] = [row for row in history if row.reset]
    assert moved.batch_id == last_batch + 1, "the reset is the batch after the last one"
    assert moved.epoch == 2
    record = json.loads(moved.reset)
    assert (record["requestedBy"], record["reason"], record["id"]) == (
        "alice",
        "v1 mis-tagged",
        "replay-1",
    )
    assert record["from"] == {topic: {str(p): o for p, o in ends.items()}}
    assert record["positions"] == {topic: {str(p): o for p, o in at_reset.items()}}
    replayed_records = sum(r.records for r in history if r.batch_id > moved.batch_id)
    assert replayed_records == AFTER

    third = driver.start(replay, epoch=3)
    third.wait_event(lambda e: e.get("event") == "claimed", timeout=180, what="the claim")
    third.kill(signal.SIGTERM)
    assert third.wait(120) == 0
    assert not [e for e in third.events() if e.get("event") == "offset reset"]
    assert [row for row in state.history(cassandra, events_table, pipeline_id) if row.reset] == [
        moved
    ]
    assert state.committed(cassandra, events_table, pipeline_id) == ends
    assert state.tagged_cells(cassandra, events_table) == new, "nothing read again"
