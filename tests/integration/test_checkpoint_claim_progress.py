"""A driver's claim carries what the checkpoint holds, on the real Cassandra node
(issue 39, item 8): the batch an older epoch committed last, unseen by the operator (a
partitioned driver), and when, so the new driver's metrics, and with them the
pipeline's status, follow the checkpoint from the claim on."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import generate_latest

from sluice_job.checkpoint import Batch, CheckpointStore
from sluice_job.metrics import PrometheusObserver
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_operator.progress import parse

pytestmark = pytest.mark.integration
TP = TopicPartition("orders", 0)


def test_a_takeover_claim_reports_the_partitioned_drivers_last_commit(
    cassandra: Any, cassandra_keyspace: str
) -> None:
    pipeline = f"ns-{uuid.uuid4().hex[:6]}/orders"

    def store() -> CheckpointStore:
        made = CheckpointStore(cassandra, cassandra_keyspace, pipeline, "img:v1")
        made.ensure_schema()
        return made

    fresh = store()
    assert fresh.claim(1).committed_at is None  # nothing committed yet

    partitioned = store()
    partitioned.claim(2)
    before = datetime.now(UTC) - timedelta(seconds=1)
    for batch_id in range(1, 18):
        batch = Batch(batch_id, (OffsetRange(TP, batch_id - 1, batch_id),), {TP: batch_id})
        partitioned.plan(batch)
        partitioned.commit(batch, datetime.now(UTC))

    claimed = store().claim(3)
    assert claimed.batch_id == 17
    assert claimed.committed_at is not None
    assert claimed.committed_at == partitioned.committed_at(17)
    assert before <= claimed.committed_at <= datetime.now(UTC)

    observer = PrometheusObserver(pipeline)
    observer.started("img:v1", epoch=3)
    observer.resumed(claimed)
    report = parse(generate_latest().decode(), pipeline)
    assert report is not None
    assert (report.epoch, report.batch_id, report.claimed) == (3, 17, True)
    assert report.committed_at is not None
    assert abs((report.committed_at - claimed.committed_at).total_seconds()) < 0.01
