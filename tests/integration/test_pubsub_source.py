"""The Pub/Sub source end to end: the real driver, the stack's Pub/Sub server through
the official client, Cassandra, Spark, and the KPI example, whose per-batch partial
counts double if any message is counted twice. What a user checks: the KPI sums are
exact, malformed messages are dead letters naming their message, every message is
acknowledged in the end, and only after its batch was committed."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.pubsub.publish import message
from tests.support import expected, kpis, state
from tests.support.driver import Driver, DriverRun
from tests.support.pubsub import PubSub
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def pubsub_spec(
    pubsub: PubSub,
    subscription: str,
    contact: str,
    keyspace: str,
    *,
    per_batch: int = 400,
    ack_deadline: int = 10,
    interval: float = 0.2,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "image": "local/test",
        "source": {
            "pubsub": {
                "project": pubsub.project,
                "subscription": subscription.rsplit("/", 1)[-1],
                "endpoint": pubsub.host,
                "maxMessagesPerBatch": per_batch,
                "ackDeadlineSeconds": ack_deadline,
            }
        },
        "transform": {"entrypoint": "sluice_job.examples.kpi:transform"},
        "sink": {
            "cassandra": {"contactPoints": [contact], "keyspace": keyspace, "table": "page_kpis"}
        },
        "checkpoint": {"cassandra": {"contactPoints": [contact], "keyspace": keyspace}},
        "trigger": {"intervalSeconds": interval},
        "spark": {"driver": {"cores": 2, "memory": "1g"}},
        **extra,
    }


@pytest.fixture
def kpi_table(cassandra: Any, cassandra_keyspace: str) -> str:
    cassandra.execute(kpis.TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    return cassandra_keyspace


def committed_messages(cassandra: Any, keyspace: str, driver: Driver) -> int:
    row = state.checkpoint_row(cassandra, keyspace, driver.checkpoint_key)
    if row is None:
        return 0
    return int(sum(p for parts in json.loads(row.offsets).values() for p in parts.values()))


def wait_all_acked(
    run: DriverRun, pubsub: PubSub, subscription: str, count: int, *, timeout: float
) -> None:
    """Until the server counts ``count`` messages acknowledged and none outstanding;
    fails at once if the driver exits."""

    def done() -> bool:
        if run.proc.poll() is not None:
            tail = run.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"driver exited {run.proc.returncode}:\n{tail}")
        stats = pubsub.stats(subscription)
        return stats["acked"] >= count and stats["unacked"] == 0

    wait_for(done, timeout=timeout, what=f"{count} messages acknowledged, none outstanding")


def stop_cleanly(run: DriverRun) -> None:
    run.kill(signal.SIGTERM)
    assert run.wait(120) == 0


def test_every_message_counts_once_and_malformed_ones_are_dead_letters_naming_it(
    pubsub: PubSub, cassandra_contact: str, cassandra: Any, kpi_table: str, driver: Driver
) -> None:
    factory = EventFactory(seed=31, bad_every=20)  # 5% malformed
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    dead_letters = pubsub.topic()
    letters = pubsub.subscription(dead_letters)
    ids = pubsub.publish_events(topic, factory, range(1_000))
    run = driver.start(
        pubsub_spec(
            pubsub,
            subscription,
            cassandra_contact,
            kpi_table,
            per_batch=250,
            deadLetter={"pubsub": {"topic": dead_letters.rsplit("/", 1)[-1]}},
        ),
        epoch=1,
    )
    wait_all_acked(run, pubsub, subscription, 1_000, timeout=300)
    stop_cleanly(run)

    assert kpis.sums(cassandra, kpi_table) == kpis.expected_sums(factory, range(1_000))
    assert committed_messages(cassandra, kpi_table, driver) == 1_000
    bad = {seq for seq in range(1_000) if factory.is_bad(seq)}
    received = pubsub.pull_until(
        letters,
        lambda d: len({x.message_id for x in d.seen}) >= len(bad),
        timeout=60,
        what="every dead letter",
        ack=lambda _d: True,
    )
    by_key = {d.attributes["key"]: d for d in received.seen}
    assert set(by_key) == {f"k-{seq}" for seq in bad}  # each malformed message, once
    for seq in bad:
        letter = by_key[f"k-{seq}"]
        data, _ = message(factory, seq)
        assert letter.data == data
        assert letter.attributes["sluice.pubsub.message.id"] == ids[seq]
        assert letter.attributes["sluice.reason"] == expected.reject_reason(data)
        assert letter.attributes["sluice.source.topic"] == subscription.rsplit("/", 1)[-1]


def test_a_crash_between_commit_and_ack_redelivers_and_counts_once(
    pubsub: PubSub, cassandra_contact: str, cassandra: Any, kpi_table: str, driver: Driver
) -> None:
    factory = EventFactory(seed=32)
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    pubsub.publish_events(topic, factory, range(800))
    spec = pubsub_spec(pubsub, subscription, cassandra_contact, kpi_table)
    # The commit of batch 2 applied, its messages not yet acknowledged: killed there.
    # The pause holds every batch (batch 1's too, before its acknowledgements): 10 s is
    # the window for the kill, which follows the announcement by well under a second.
    first = driver.start(spec, epoch=1, failpoints="after_commit=10")
    first.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "after_commit" and e["batch_id"] >= 2,
        timeout=300,
        what="the commit of batch 2",
    )
    first.signal_tree(signal.SIGKILL)
    first.wait(60)
    assert pubsub.stats(subscription)["acked"] <= 400  # batch 1 at most

    second = driver.start(spec, epoch=2)
    wait_all_acked(second, pubsub, subscription, 800, timeout=300)
    stop_cleanly(second)

    assert kpis.sums(cassandra, kpi_table) == kpis.expected_sums(factory, range(800))
    assert committed_messages(cassandra, kpi_table, driver) == 800
    dropped = sum(e["deduplicated"] for e in second.events() if e.get("event") == "repeats")
    assert dropped >= 400  # batch 2 came back, and no message of it counted again
    assert pubsub.stats(subscription)["redelivered"] >= 400


def test_leases_that_expire_mid_batch_cost_a_redelivery_not_a_count(
    pubsub: PubSub, cassandra_contact: str, cassandra: Any, kpi_table: str, driver: Driver
) -> None:
    factory = EventFactory(seed=33)
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    pubsub.publish_events(topic, factory, range(800))
    pubsub.faults(drop_modacks=True)  # lease renewals answer OK and renew nothing
    spec = pubsub_spec(pubsub, subscription, cassandra_contact, kpi_table)
    run = driver.start(spec, epoch=1, failpoints="after_write=8")
    run.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "after_write" and e["batch_id"] == 1,
        timeout=300,
        what="batch 1 written",
    )
    # Batch 1's leases run out while it runs, and the server hands its messages to
    # another subscriber of the subscription: the driver's acknowledgements after its
    # commit are then stale, and the messages come back to it later.
    assert pubsub.redeliver(subscription) >= 400
    pubsub.pull_until(
        subscription, lambda d: len(d.seen) >= 400, timeout=60, what="batch 1 handed out again"
    )
    wait_all_acked(run, pubsub, subscription, 800, timeout=300)
    stop_cleanly(run)

    assert kpis.sums(cassandra, kpi_table) == kpis.expected_sums(factory, range(800))
    assert committed_messages(cassandra, kpi_table, driver) == 800
    stale = pubsub.stats(subscription)["acks_stale"]  # batch 1's, handed out meanwhile
    assert stale > 0
    assert sum(e["deduplicated"] for e in run.events() if e.get("event") == "repeats") >= stale


def test_a_zombie_driver_is_fenced_and_acknowledges_nothing(
    pubsub: PubSub, cassandra_contact: str, cassandra: Any, kpi_table: str, driver: Driver
) -> None:
    factory = EventFactory(seed=34)
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    pubsub.publish_events(topic, factory, range(800))
    spec = pubsub_spec(pubsub, subscription, cassandra_contact, kpi_table)
    zombie = driver.start(spec, epoch=1, failpoints="after_write=3")
    zombie.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "after_write" and e["batch_id"] >= 2,
        timeout=300,
        what="batch 2 written",
    )
    zombie.signal_tree(signal.SIGSTOP)  # its node is cut off: it neither runs nor dies
    acked_before = pubsub.stats(subscription)["acked"]

    successor = driver.start(spec, epoch=2)
    wait_all_acked(successor, pubsub, subscription, 800, timeout=300)
    acked = pubsub.stats(subscription)["acked"]
    zombie.signal_tree(signal.SIGCONT)  # back: its commit of batch 2 is refused
    assert zombie.wait(120) == 3
    assert zombie.message()["reason"] == "Fenced"
    stop_cleanly(successor)

    zombie_acks = [e for e in zombie.events() if e.get("event") == "acknowledged"]
    assert all(e["batch_id"] < 2 for e in zombie_acks)
    assert pubsub.stats(subscription)["acked"] == acked >= acked_before
    assert kpis.sums(cassandra, kpi_table) == kpis.expected_sums(factory, range(800))
    recovered = [e for e in successor.events() if e.get("event") == "recovering planned batch"]
    assert [e["batch_id"] for e in recovered] == [2]  # the zombie's planned batch, as planned
