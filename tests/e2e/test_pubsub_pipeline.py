"""End to end from Google Cloud Pub/Sub: ``examples/pubsub-kpi-pipeline.yaml``, pointed
at the stack as ``sluice-dev pipeline apply`` points it (``localrun.localized``), is
applied through the real operator; its driver pods run on the test's private nodes and
read a subscription of the stack's Pub/Sub server through the official client while
events are published at a steady rate. The driver is SIGKILLed mid-stream once it
has committed; what it had pulled and not acknowledged comes back to its successor.
Afterwards a user's checks hold: every window's KPI sums in Cassandra are exactly the
events' (a message redelivered after the kill counted once), the malformed events are
dead letters, the server has every message acknowledged and none outstanding, and the
pipeline runs.

Runs on the node agent, in ``make test`` (CI's hour; see ``test_pipeline``). The
source changes nothing a kubelet does: a driver's container killed on a real node is
``test_real_node_pipeline``'s.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
import yaml

from sluice_dev.events import EventFactory
from sluice_dev.localrun import localized
from sluice_dev.paths import REPO_ROOT
from tests.support import kpis, state
from tests.support.agents import ISOLATION_TAINT
from tests.support.e2e import JOB_IMAGE, Setup
from tests.support.pubsub import Publishing, PubSub
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

EXAMPLE = REPO_ROOT / "examples" / "pubsub-kpi-pipeline.yaml"
RATE = 20.0
"""Messages per second while the driver is killed (a steady stream, not a backlog)."""


def pipeline_from_the_example(setup: Setup, pubsub: PubSub, subscription: str, letters: str) -> Any:
    """The example as ``pipeline apply`` runs it, with the test's names, image and nodes."""
    body = localized(
        yaml.safe_load(EXAMPLE.read_text()),
        namespace=setup.pipeline.namespace,
        bootstrap=setup.bootstrap,
        contact=setup.contact,
        pubsub=pubsub.host,
    )
    body["metadata"]["name"] = setup.pipeline.name
    spec = body["spec"]
    spec["image"] = f"{JOB_IMAGE}:v1"
    spec["source"]["pubsub"].update(
        project=pubsub.project,
        subscription=subscription.rsplit("/", 1)[-1],
        maxMessagesPerBatch=1_000,
        ackDeadlineSeconds=10,
    )
    spec["sink"]["cassandra"]["keyspace"] = setup.keyspace
    spec["checkpoint"] = {
        "cassandra": {"contactPoints": [setup.contact], "keyspace": setup.keyspace}
    }
    spec["deadLetter"] = {"pubsub": {"topic": letters.rsplit("/", 1)[-1]}}
    spec["spark"]["driver"].update(
        nodeSelector={"sluice.dev/pool": setup.pool},
        tolerations=[{"key": ISOLATION_TAINT, "operator": "Exists"}],
    )
    spec["restart"] = {"backoffSeconds": 1, "maxBackoffSeconds": 4, "maxFailures": 10}
    spec["failover"] = {"nodeLostSeconds": 5}
    return body


def test_the_pubsub_kpi_example_counts_every_event_once_through_a_driver_kill(
    setup: Setup, pubsub: PubSub
) -> None:
    began = time.monotonic()
    factory = EventFactory(seed=65, bad_every=25)
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    letters = pubsub.topic()
    letters_subscription = pubsub.subscription(letters)
    setup.cassandra.execute(kpis.TABLE.format(keyspace=setup.keyspace), timeout=60)
    setup.operators.start()
    applied = setup.kubectl.apply(pipeline_from_the_example(setup, pubsub, subscription, letters))
    assert f"{setup.pipeline.name} created" in applied
    publishing = Publishing(pubsub, topic, factory, rate=RATE)

    setup.pipeline.wait_phase("Running", epoch=1, timeout=180)
    setup.wait_commit_by(1)
    committed = time.monotonic()
    _, pid = setup.driver_pid()
    assert publishing.running, "the kill happens while events are being published"
    leased = pubsub.stats(subscription)["unacked"]
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: any(
            row.epoch > 1
            for row in state.history(setup.cassandra, setup.keyspace, setup.pipeline_id)
        ),
        timeout=240,
        what="a batch committed by a driver after the killed one",
    )
    recovered = time.monotonic()
    count = publishing.finish()

    def drained() -> dict[str, int] | None:
        stats = pubsub.stats(subscription)
        return stats if stats["acked"] >= count and stats["unacked"] == 0 else None

    stats = wait_for(
        drained, timeout=240, what=f"all {count} messages acknowledged, none outstanding"
    )
    done = time.monotonic()
    assert kpis.sums(setup.cassandra, setup.keyspace) == kpis.expected_sums(factory, range(count))
    bad = {f"k-{seq}" for seq in range(count) if factory.is_bad(seq)}
    dead = pubsub.pull_until(
        letters_subscription,
        lambda d: len({x.attributes["key"] for x in d.seen}) >= len(bad),
        timeout=60,
        what="every malformed event as a dead letter",
        ack=lambda _d: True,
    )
    assert {d.attributes["key"] for d in dead.seen} == bad
    status = setup.pipeline.status()
    assert status["phase"] == "Running"
    assert status["epoch"] >= 2, "the killed driver was replaced"
    print(
        f"\nfirst commit {committed - began:.0f}s after apply; the epoch-1 driver killed "
        f"with {leased} messages unacknowledged; its successor committing "
        f"{recovered - committed:.0f}s later; drained {done - recovered:.0f}s after that. "
        f"{count} events published at {RATE:.0f}/s, {len(bad)} malformed; server: "
        f"{stats['acked']} acked, {stats['redelivered']} redelivered, 0 unacked; "
        f"KPI sums exact"
    )
