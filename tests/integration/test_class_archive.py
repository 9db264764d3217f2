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


def _run_once(
    driver: Driver,
    stores: tuple[str, Any, str, Any, str],
    seed: int,
    env: dict[str, str] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """A driver over :data:`RECORDS` new events, drained and stopped, every event in
    the sink once; returns its run and its "spark session started" line. ``stores``:
    the Kafka bootstrap and topic factory, the Cassandra contact and session, the
    events table's keyspace."""
    bootstrap, make_topic, contact, cassandra, keyspace = stores
    topic = make_topic(partitions=PARTITIONS)
    produce(bootstrap, topic, RECORDS, factory=EventFactory(seed=seed))
    pipeline = spec(bootstrap=bootstrap, topic=topic, contact=contact, keyspace=keyspace)
    run = driver.start(pipeline, epoch=1, env=env)
    started: dict[str, Any] = run.wait_event(
        lambda e: e.get("event") == "spark session started",
        timeout=180,
        what="the driver's Spark session",
    )
    ends = state.end_offsets(bootstrap, topic, PARTITIONS)
    drain_and_stop(run, cassandra, keyspace, driver.checkpoint_key, ends)
    assert len(state.events(cassandra, keyspace)) == RECORDS
    return run, started


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
    stores = (kafka_bootstrap, kafka_topic, cassandra_contact, cassandra, events_table)
    _, started = _run_once(driver, stores, seed=3)
    assert started["class_archive"] is True


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
    stores = (kafka_bootstrap, kafka_topic, cassandra_contact, cassandra, events_table)
    run, started = _run_once(driver, stores, seed=4, env={names.SPARK_CLASS_ARCHIVE: str(damaged)})
    assert started["class_archive"] is False
    # A damaged archive crashes the JVM at start: the driver starts it once more without.
    [again] = [e for e in run.events() if e.get("event", "").startswith("spark's JVM did not")]
    assert str(damaged) in again["archive"]
