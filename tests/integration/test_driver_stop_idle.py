"""A driver with no batch in flight stops at once on SIGTERM, and begins nothing after
it: during its start-up and while it waits for a dependency (issue 43, item 1).

Reproduction (before the fix), each test with ``upgrade.stopTimeoutSeconds: 120`` so
that a hang shows apart from a prompt stop:

* SIGTERM as soon as the driver serves its metrics (start-up, Spark not up yet): it
  logged "finishing the batch in flight", went on starting, claimed epoch 1 and only
  then stopped (the test found a claim);
* SIGTERM while it waited for the checkpoint store (a contact point nobody listens
  on), for Kafka after its claim, or for Kafka as a hot standby getting ready: it
  logged "finishing the batch in flight" although none was, went on retrying, and
  120 s later the watchdog ended it with exit 1 ("batch in flight did not finish
  within 120s of SIGTERM"), as ``kubectl delete`` saw in the reports.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_job import stopping
from tests.support import kpis, state
from tests.support.agents import free_port
from tests.support.driver import Driver, DriverRun, spec
from tests.support.scrape import scrape
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

STOP_TIMEOUT = 120
PROMPT_SECONDS = 20.0
"""A prompt stop on a loaded 2-core machine: one attempt of a wait for Kafka (10 s)
and Spark's stop; a hang lasts the stop timeout."""
START_UP_SECONDS = 60.0
"""The same during start-up: a SIGTERM while Spark's JVM starts is seen once it is up
(up to 15 s on a loaded 2-core machine; the launch cannot be interrupted)."""


def stop_spec(**overrides: Any) -> dict[str, Any]:
    return spec(**overrides, upgrade={"stopTimeoutSeconds": STOP_TIMEOUT})


def sigterm_and_time(run: DriverRun) -> float:
    """SIGTERM the driver; seconds until it exited (fails after the stop timeout)."""
    signalled = time.monotonic()
    run.kill(signal.SIGTERM)
    run.wait(STOP_TIMEOUT + 30)
    return time.monotonic() - signalled


def assert_stopped_at_once(run: DriverRun, seconds: float, within: float = PROMPT_SECONDS) -> None:
    events = run.events()
    names = [e.get("event") for e in events]
    assert run.proc.returncode == 0, run.log.read_text()[-3000:]
    assert seconds < within, f"stopped {seconds:.1f}s after SIGTERM"
    assert stopping.NOW in names, names
    assert stopping.FINISH not in names
    assert "batch" not in names
    assert not [e for e in events if e.get("event") == "phase"]
    assert run.message()["reason"] == "Stopped"
    print(f"\nstopped {seconds:.1f}s after SIGTERM; left undone: {left_undone(events)}")


def claims(session: Any, keyspace: str, pipeline_id: str) -> list[Any]:
    """The claims of the pipeline; none if the driver stopped before making its tables."""
    try:
        return state.claims(session, keyspace, pipeline_id)
    except InvalidRequest:
        return []


def left_undone(events: list[dict[str, Any]]) -> str | None:
    return next(
        (e["left_undone"] for e in events if e.get("event") == "stopped with no batch in flight"),
        None,
    )


def waiting_for(run: DriverRun, dependency: str, step: str) -> None:
    run.wait_event(
        lambda e: (
            e.get("event") == "dependency unavailable"
            and e.get("dependency") == dependency
            and e.get("step") == step
        ),
        timeout=240,
        what=f"the driver to wait for {dependency} ({step})",
    )


def test_sigterm_during_start_up_stops_before_the_claim(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=2)
    port = free_port()
    run = driver.start(
        stop_spec(
            bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
        ),
        epoch=1,
        env={"SLUICE_METRICS_PORT": str(port)},
    )
    # Its metrics are served first thing in the start-up, before Spark and the stores.
    wait_for(lambda: scrape(port), timeout=120, what="the driver's metrics", ignoring=(OSError,))
    seconds = sigterm_and_time(run)
    assert "claimed" not in [e.get("event") for e in run.events()]
    assert claims(cassandra, events_table, driver.checkpoint_key) == []
    assert_stopped_at_once(run, seconds, within=START_UP_SECONDS)


def test_sigterm_while_waiting_for_the_checkpoint_store_stops_at_once(
    kafka_bootstrap: str, kafka_topic: Any, driver: Driver
) -> None:
    away = f"127.0.0.1:{free_port()}"  # nobody listens: Cassandra is down
    run = driver.start(
        stop_spec(
            bootstrap=kafka_bootstrap, topic=kafka_topic(partitions=1), contact=away, keyspace="ks"
        ),
        epoch=1,
    )
    waiting_for(run, "cassandra", "connect to the checkpoint store")
    seconds = sigterm_and_time(run)
    assert_stopped_at_once(run, seconds)
    assert left_undone(run.events()) == "connect to the checkpoint store"


def test_sigterm_while_waiting_for_kafka_after_the_claim_stops_at_once_and_releases(
    cassandra_contact: str, cassandra: Any, events_table: str, driver: Driver
) -> None:
    away = f"127.0.0.1:{free_port()}"  # nobody listens: Kafka is down
    run = driver.start(
        stop_spec(bootstrap=away, topic="events", contact=cassandra_contact, keyspace=events_table),
        epoch=1,
    )
    waiting_for(run, "kafka", "kafka")
    seconds = sigterm_and_time(run)
    assert_stopped_at_once(run, seconds)
    assert "released" in [e.get("event") for e in run.events()]
    row = state.checkpoint_row(cassandra, events_table, driver.checkpoint_key)
    assert (row.epoch, row.released, row.planned_id) == (1, True, None)
    assert state.history(cassandra, events_table, driver.checkpoint_key) == []


def test_sigterm_a_hot_standby_waiting_for_kafka_stops_at_once_unclaimed(
    cassandra_contact: str, cassandra: Any, events_table: str, driver: Driver
) -> None:
    away = f"127.0.0.1:{free_port()}"
    run = driver.start(
        stop_spec(bootstrap=away, topic="events", contact=cassandra_contact, keyspace=events_table),
        epoch=2,
        env={"SLUICE_STANDBY": "hot", "SLUICE_CONTROL_PORT": str(free_port())},
    )
    waiting_for(run, "kafka", "kafka")
    seconds = sigterm_and_time(run)
    assert_stopped_at_once(run, seconds)
    assert "claimed" not in [e.get("event") for e in run.events()]
    assert claims(cassandra, events_table, driver.checkpoint_key) == []


def test_sigterm_while_waiting_for_pubsub_stops_at_once(
    cassandra_contact: str, cassandra: Any, events_table: str, driver: Driver
) -> None:
    """The reported case: a Pub/Sub pipeline deleted while its driver waited for
    Pub/Sub (``kubectl delete sp --timeout=120s`` timed out)."""
    cassandra.execute(kpis.TABLE.format(keyspace=events_table), timeout=60)
    away = f"127.0.0.1:{free_port()}"  # nobody listens: Pub/Sub is down
    pipeline = {
        **stop_spec(
            bootstrap="unused:9092",
            topic="unused",
            contact=cassandra_contact,
            keyspace=events_table,
        ),
        "source": {"pubsub": {"project": "my-project", "subscription": "sub", "endpoint": away}},
        "transform": {"entrypoint": "sluice_job.examples.kpi:transform"},
    }
    pipeline["sink"]["cassandra"]["table"] = "page_kpis"
    run = driver.start(pipeline, epoch=1)
    waiting_for(run, "pubsub", "pubsub subscription")
    seconds = sigterm_and_time(run)
    assert_stopped_at_once(run, seconds)
    assert claims(cassandra, events_table, driver.checkpoint_key) == []
