"""Spark's work runs below the driver's own threads (``sluice_job.spark``).

The commit's lightweight transaction is latency, Spark's tasks are throughput; on a
driver's busy cores the commit's threads waited for a core after each round trip
(docs/tuning.md, the commit's tail). The driver therefore launches Spark's JVM from a
thread niced to 10, so the JVM and the Python workers it starts are at 10 while the
driver's main thread, which plans and commits, keeps its priority.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, descendants, drain_and_stop, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def niceness(pid: int, thread: int | None = None) -> int:
    """The niceness of a process's thread (its main thread by default), from /proc."""
    path = Path(f"/proc/{pid}/task/{thread or pid}/stat")
    return int(path.read_text().rsplit(")", 1)[1].split()[16])


def command(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.parametrize(("setting", "expected"), [(None, 10), ("0", 0)])
def test_the_spark_jvm_and_its_python_workers_run_below_the_driver_that_commits(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
    setting: str | None,
    expected: int,
) -> None:
    topic = kafka_topic(partitions=2)
    produce(kafka_bootstrap, topic, 40, factory=EventFactory(seed=41))
    body = spec(
        bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
    )
    env = {} if setting is None else {"SLUICE_SPARK_NICENESS": setting}
    run = driver.start(body, epoch=1, env=env)
    pipeline_id = driver.checkpoint_key
    wait_for(
        lambda: sum(state.committed(cassandra, events_table, pipeline_id).values()) == 40,
        timeout=240,
        what="the first records committed",
    )

    below = [p for p in descendants(run.proc.pid) if p != run.proc.pid]
    jvms = [p for p in below if "org.apache.spark.deploy.SparkSubmit" in command(p)]
    workers = [p for p in below if "pyspark.daemon" in command(p) or "pyspark.worker" in command(p)]
    assert len(jvms) == 1, [command(p) for p in below]
    assert workers, "the batch's Python workers were not found below the driver"
    assert niceness(run.proc.pid) == 0, "the driver's main thread plans and commits"
    assert {niceness(p) for p in [*jvms, *workers]} == {expected}
    jvm_threads = [int(t) for t in os.listdir(f"/proc/{jvms[0]}/task")]
    assert {niceness(jvms[0], t) for t in jvm_threads} == {expected}, "every JVM thread"

    ends = state.committed(cassandra, events_table, pipeline_id)
    drain_and_stop(run, cassandra, events_table, pipeline_id, ends, timeout=60)
