"""The driver's metrics, scraped over HTTP while the real driver drains a backlog:
what an operator's dashboard and alerts would read."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.agents import free_port
from tests.support.driver import Driver, spec
from tests.support.scrape import Scrape, scrape
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 4


def total_lag(sample: Scrape) -> float | None:
    lags = sample.all("sluice_consumer_lag")
    return sum(value for _, value in lags) if len(lags) == PARTITIONS else None


def test_counters_and_lag_follow_a_backlog_being_drained(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    records, cap, port = 6_000, 300, free_port()
    topic, dead_letter_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, records, factory=EventFactory(seed=21, bad_every=20))
    pipeline_id = driver.pipeline_id  # the metrics label: no cluster id
    pipeline_spec = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=events_table,
        entrypoint="sluice_job.examples.events:transform",
        cap=cap,
        interval=0.5,
        deadLetter={"kafka": {"topic": dead_letter_topic}},
    )
    pipeline_spec["source"]["kafka"]["commitToConsumerGroup"] = True
    run = driver.start(pipeline_spec, epoch=3, env={"SLUICE_METRICS_PORT": str(port)})

    lags: list[float] = []

    def drained() -> Scrape | None:
        sample = scrape(port)
        lag = total_lag(sample)
        if lag is not None and (not lags or lags[-1] != lag):
            lags.append(lag)
        done = sample.value("sluice_records_in_total") == records and lag == 0
        return sample if done else None

    final = wait_for(drained, timeout=300, what="every record read and lag 0", ignoring=(OSError,))
    committed_at = time.time()
    run.kill(signal.SIGTERM)
    assert run.wait(120) == 0

    labels = {"pipeline": pipeline_id}
    batches = [b for b in run.batches() if b["records"] > 0]
    assert final.value("sluice_batches_total", **labels) == len(batches)
    assert len(batches) >= records // (PARTITIONS * cap)  # the cap bounded each batch
    assert final.value("sluice_records_in_total", **labels) == records
    assert final.value("sluice_records_rejected_total", **labels) == records // 20
    assert final.value("sluice_records_out_total", **labels) == records - records // 20
    assert final.value("sluice_epoch", **labels) == 3
    assert final.value("sluice_driver_info", pipeline=pipeline_id, code_version="local/test") == 1
    assert final.value("sluice_records_per_partition_cap", **labels) == cap
    assert final.value("sluice_batch_failures_total", **labels) == 0
    assert final.value("sluice_commit_conflicts_total", **labels) == 0
    last_commit = final.value("sluice_last_commit_timestamp_seconds", **labels)
    assert last_commit is not None
    assert committed_at - 60 < last_commit <= committed_at
    for phase in ("read", "transform", "dead_letter", "write", "commit"):
        count = final.value("sluice_batch_phase_seconds_count", phase=phase, **labels)
        assert count == len(batches), phase

    assert lags[0] > 0  # seen while the backlog drained ...
    assert lags == sorted(lags, reverse=True)  # ... only ever shrinking ...
    assert lags[-1] == 0  # ... to nothing
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    group = f"sluice.{driver.namespace}.{driver.pipeline}"
    wait_for(
        lambda: state.group_offsets(kafka_bootstrap, group) == ends,
        timeout=30,
        what=f"consumer group {group} to show the committed positions",
    )
