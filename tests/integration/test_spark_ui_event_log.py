"""Spark's UI and event logs, turned on by the pipeline's fields, on the real driver:
what an engineer debugging a slow pipeline opens (the UI's REST API answers with the
pipeline's application and its jobs) and what a History Server reads afterwards (the
rolled event log of the run, with the jobs of its batches)."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support.driver import Driver, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def event_log_text(path: Path) -> str:
    """An event log file as the History Server reads it (Spark compresses with zstd)."""
    if path.suffix == ".zstd":
        with pa.CompressedInputStream(pa.OSFile(str(path)), "zstd") as stream:
            return bytes(stream.read()).decode()
    return path.read_text()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def answer(url: str) -> Any:
    """``get_json`` for a wait: the UI may refuse or answer slowly while the driver
    starts its first batch (a 5 s read timed out in a CI rehearsal on a loaded 2-core
    machine and failed the test), which is no answer yet rather than a failure."""
    try:
        return get_json(url)
    except (TimeoutError, ConnectionError, urllib.error.URLError):
        return None


def test_the_ui_shows_the_pipelines_jobs_and_the_event_log_keeps_them(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    events_table: str,
    driver: Driver,
    tmp_path: Path,
) -> None:
    topic, records = kafka_topic(partitions=2), 400
    produce(kafka_bootstrap, topic, records, factory=EventFactory(seed=31))
    events = tmp_path / "spark-events"
    events.mkdir()
    pipeline = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="sluice_job.examples.events:transform",
        cap=100,
    )
    pipeline["spark"] |= {"ui": {"enabled": True}, "eventLog": {"dir": events.as_uri()}}
    run = driver.start(pipeline, epoch=1)

    announced = run.wait_event(
        lambda e: e.get("event") == "spark ui", timeout=180, what="the driver to log its UI"
    )
    assert str(announced["url"]).endswith(":4040")
    api = "http://127.0.0.1:4040/api/v1/applications"
    [app] = wait_for(lambda: answer(api), timeout=120, what="the UI's REST API")
    assert app["name"] == f"sluice-{driver.namespace}-{driver.pipeline}"
    wait_for(
        lambda: sum(b["records"] for b in run.batches()) == records,
        timeout=240,
        what="every record committed",
    )
    jobs = get_json(f"{api}/{app['id']}/jobs")
    assert jobs, "the batches' Spark jobs are in the UI"
    assert all(job["status"] == "SUCCEEDED" for job in jobs)

    run.kill(signal.SIGTERM)
    assert run.wait(120) == 0
    [log_dir] = list(events.glob("eventlog_v2_*"))  # rolling event logs: one dir per run
    text = "".join(event_log_text(f) for f in sorted(log_dir.glob("events_*")))
    assert '"Event":"SparkListenerApplicationStart"' in text
    assert text.count('"Event":"SparkListenerJobEnd"') >= len(jobs)
    assert '"Event":"SparkListenerApplicationEnd"' in text  # the clean stop closed it
