"""The drivers' class data sharing archive (``sluice_job.class_archive``), made by the
stack's provisioning with a real JVM and mapped by a real driver's; and an archive
the JVM cannot use (made elsewhere, or damaged) costs only the speed: the driver
says so in its log and runs as without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice_api import env as names
from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RECORDS = 400
PARTITIONS = 2


def _session_started(run: Any) -> dict[str, Any]:
    event: dict[str, Any] = run.wait_event(
        lambda e: e.get("event") == "spark session started",
        timeout=180,
        what="the driver's Spark session",
    )
    return event


def test_a_driver_maps_the_provisioned_class_archive(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    archive = Path(driver.image_env[names.SPARK_CLASS_ARCHIVE])
    assert archive.stat().st_size > 50 * 2**20, "Spark's classes, not an empty file"
    assert archive.stat().st_mode & 0o222 == 0, "written once, then read-only"
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=3))
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
        ),
        epoch=1,
    )
    assert _session_started(run)["class_archive"] is True
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(run, cassandra, events_table, driver.checkpoint_key, ends)
    assert len(state.events(cassandra, events_table)) == RECORDS


def test_a_damaged_archive_is_reported_and_the_driver_runs_without_it(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
    tmp_path: Path,
) -> None:
    damaged = tmp_path / "spark.jsa"
    damaged.write_bytes(Path(driver.image_env[names.SPARK_CLASS_ARCHIVE]).read_bytes()[:4096])
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=4))
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap, topic=topic, contact=cassandra_contact, keyspace=events_table
        ),
        epoch=1,
        env={names.SPARK_CLASS_ARCHIVE: str(damaged)},
    )
    assert _session_started(run)["class_archive"] is False
    # A damaged archive crashes the JVM at start: the driver starts it once more without.
    [again] = [e for e in run.events() if e.get("event", "").startswith("spark's JVM did not")]
    assert str(damaged) in again["archive"]
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(run, cassandra, events_table, driver.checkpoint_key, ends)
    assert len(state.events(cassandra, events_table)) == RECORDS
