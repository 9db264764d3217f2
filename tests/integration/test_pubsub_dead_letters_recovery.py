"""Pub/Sub dead letters through a crash: a batch re-run after its letters were confirmed
does not publish them again (issue 43, item 4).

The real driver with a Pub/Sub source and a Pub/Sub dead-letter topic (the stack's
server), the KPI example, 5% malformed messages. The first driver is killed between
its first batch's write and its commit (``after_write``: the letters are confirmed,
nothing is committed or acknowledged); a second driver recovers that batch from the
spool and drains the subscription. What a user checks: each malformed message has
exactly one letter (by ``sluice.pubsub.message.id``).
"""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from tests.integration.test_pubsub_source import (
    kpi_table,
    pubsub_spec,
    stop_cleanly,
    wait_all_acked,
)
from tests.support import kpis
from tests.support.driver import Driver
from tests.support.pubsub import Deliveries, PubSub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

__all__ = ["kpi_table"]  # the fixture, used by name

MESSAGES = 800
SKIPPED = "dead letters of this batch already durable: not written again"


def test_a_recovered_batch_does_not_publish_its_confirmed_dead_letters_again(
    pubsub: PubSub, cassandra_contact: str, cassandra: Any, kpi_table: str, driver: Driver
) -> None:
    factory = EventFactory(seed=44, bad_every=20)
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    dead_letters = pubsub.topic()
    letters = pubsub.subscription(dead_letters)
    ids = pubsub.publish_events(topic, factory, range(MESSAGES))
    spec = pubsub_spec(
        pubsub,
        subscription,
        cassandra_contact,
        kpi_table,
        deadLetter={"pubsub": {"topic": dead_letters.rsplit("/", 1)[-1]}},
    )
    first = driver.start(spec, epoch=1, failpoints="after_write=30")
    killed = first.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "after_write",
        timeout=300,
        what="the first batch's write and dead letters",
    )
    first.signal_tree(signal.SIGKILL)
    first.wait(60)
    assert pubsub.stats(subscription)["acked"] == 0

    second = driver.start(spec, epoch=2)
    wait_all_acked(second, pubsub, subscription, MESSAGES, timeout=300)
    stop_cleanly(second)

    assert kpis.sums(cassandra, kpi_table) == kpis.expected_sums(factory, range(MESSAGES))
    bad = {ids[seq] for seq in range(MESSAGES) if factory.is_bad(seq)}
    received = pubsub.pull_until(
        letters, _drained(len(bad)), timeout=120, what="every dead letter", ack=lambda _d: True
    )
    # One letter per publish (a letter Pub/Sub redelivers has the same id).
    published = {d.message_id: d for d in received.seen}
    per_source = Counter(d.attributes["sluice.pubsub.message.id"] for d in published.values())
    repeated = {source: n for source, n in per_source.items() if n > 1}
    assert not repeated, f"{len(published)} letters, {len(bad)} bad, {len(repeated)} repeated"
    assert set(per_source) == bad
    skipped = [e["batch_id"] for e in second.events() if e.get("event") == SKIPPED]
    assert skipped == [killed["batch_id"]]


def _drained(expected: int) -> Any:
    """Done when at least ``expected`` letters came and a pull brought nothing new."""
    seen = [-1]

    def done(deliveries: Deliveries) -> bool:
        count = len(deliveries.seen)
        finished = count >= expected and count == seen[0]
        seen[0] = count
        return finished

    return done
