"""A batch that never finishes ends the driver instead of showing Running forever.

Reproduction (before the fix): the driver had no batch deadline and its spec no
``batchTimeoutSeconds``; it refuses this test's manifest (exit 2, unknown field), and
without the field nothing ends a batch whose Spark job blocks in a UDF that sleeps
an hour per record: no commit, no log line after the ``read`` phase, ``Running``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, spec

pytestmark = pytest.mark.integration

TIMEOUT_SECONDS = 10.0


def test_a_hung_batch_ends_the_driver_with_batch_timeout_and_commits_nothing(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, 20, factory=EventFactory(seed=8))
    pipeline_spec = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="tests.support.transforms:paced",
        options={"tag": "v1", "secondsPerRecord": 3600},
        trigger={"intervalSeconds": 0.2, "batchTimeoutSeconds": TIMEOUT_SECONDS},
    )
    run = driver.start(pipeline_spec, epoch=1)
    run.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "read",
        timeout=240,
        what="the first batch to start",
    )
    started_at = time.monotonic()
    code = run.wait(TIMEOUT_SECONDS + 120)
    waited = time.monotonic() - started_at
    print(f"\ndriver exited {code} {waited:.1f}s after the batch began")

    assert code == 1
    message = run.message()
    assert message["reason"] == "BatchTimeout"
    assert "trigger.batchTimeoutSeconds=10" in message["message"]
    assert message["epoch"] == 1
    assert waited >= TIMEOUT_SECONDS - 2
    assert [e for e in run.events() if e.get("event") == "batch timeout"]
    row = state.checkpoint_row(cassandra, events_table, driver.checkpoint_key)
    assert row is not None
    assert row.batch_id == 0, "the hung batch is not committed"
    assert state.events(cassandra, events_table) == {}
