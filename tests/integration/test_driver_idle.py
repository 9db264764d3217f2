"""An idle pipeline with ``intervalSeconds: 0`` does not poll Kafka in a tight loop.

Reproduction (before the fix, ``bfad3ac``): with no new data the driver asked Kafka
for its watermarks again at once, over and over; against the local broker its
process used 5.8 s of CPU in a 15 s idle window (with a CI run beside it), now 0.02 s.
It backs off from 50 ms to 1 s between looks while nothing arrives, and a new record
is still committed within seconds.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

WINDOW = 15.0


def cpu_seconds(pid: int) -> float:
    """User and system CPU of process ``pid`` (all its threads, not its children)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_idle_pipeline_with_a_zero_interval_does_not_spin_and_still_picks_up_data(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, factory=EventFactory(seed=95))
    body = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        interval=0,
    )
    pipeline_id = driver.checkpoint_key
    run = driver.start(body, epoch=1)
    wait_for(
        lambda: state.committed(cassandra, events_table, pipeline_id) == {0: 10},
        timeout=240,
        what="the first records committed",
    )

    before = cpu_seconds(run.proc.pid)
    with pytest.raises(subprocess.TimeoutExpired):  # it runs on through the idle window
        run.proc.wait(timeout=WINDOW)
    used = cpu_seconds(run.proc.pid) - before
    assert used < 3.0, f"the idle driver used {used:.1f} s of CPU in {WINDOW:.0f} s"

    produce(kafka_bootstrap, topic, 5, factory=EventFactory(seed=96))
    drain_and_stop(run, cassandra, events_table, pipeline_id, {0: 15}, timeout=60)
