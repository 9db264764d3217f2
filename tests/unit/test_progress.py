"""The operator reads a running driver's progress from the metrics the driver serves."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import generate_latest

from sluice_job.checkpoint import Batch
from sluice_job.metrics import PrometheusObserver
from sluice_job.offsets import OffsetRange, TopicPartition, Watermarks
from sluice_job.ports import Committed
from sluice_operator.progress import parse

pytestmark = pytest.mark.unit

TP0, TP1 = TopicPartition("ui-events", 0), TopicPartition("ui-events", 1)


def exposition(observer: PrometheusObserver) -> str:
    return generate_latest().decode()


def test_a_drivers_own_exposition_gives_its_epoch_last_commit_and_lag() -> None:
    pipeline = f"ns-{uuid.uuid4().hex[:6]}/kpis"
    observer = PrometheusObserver(pipeline)
    observer.started("sluice-job:v2", epoch=6)
    before = datetime.now(UTC).replace(microsecond=0)
    batch = Batch(41, (OffsetRange(TP0, 0, 10),), {TP0: 10, TP1: 5})
    observer.committed(Committed(batch, None, commit_seconds=0.01, batch_seconds=0.5))
    observer.lag({TP0: Watermarks(0, 25), TP1: Watermarks(0, 12)}, {TP0: 10, TP1: 5})

    report = parse(exposition(observer), pipeline)

    assert report is not None
    assert report.epoch == 6
    assert report.batch_id == 41
    assert report.committed_at is not None
    assert report.committed_at >= before
    assert report.lag == 15 + 7


def test_a_pubsub_driver_reports_the_messages_it_holds_and_the_oldest_ones_age() -> None:
    from sluice_job.metrics import PubSubMetrics

    pipeline = f"ns-{uuid.uuid4().hex[:6]}/ps"
    PrometheusObserver(pipeline).started("sluice-job:v1", epoch=2)
    now = [datetime(2026, 12, 1, 12, 0, 42, 700_000, tzinfo=UTC)]
    pubsub = PubSubMetrics(pipeline, clock=lambda: now[0])
    pubsub.started()
    pubsub.held(1_250, datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC))

    report = parse(generate_latest().decode(), pipeline)

    assert report is not None
    assert (report.lag, report.oldest_age) == (1_250, 42)


def test_the_oldest_messages_age_grows_while_its_batch_waits() -> None:
    """SluicePubSubMessagesAging: a batch stuck on a dependency reports nothing new,
    and its messages' age must still grow in each scrape (it stayed at the age it had
    when the batch was taken, so the alert could never fire on a stuck batch)."""
    from sluice_job.metrics import PubSubMetrics

    pipeline = f"ns-{uuid.uuid4().hex[:6]}/ps"
    PrometheusObserver(pipeline).started("sluice-job:v1", epoch=2)
    published = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    now = [published + timedelta(seconds=5)]
    pubsub = PubSubMetrics(pipeline, clock=lambda: now[0])
    pubsub.started()
    pubsub.held(400, published)
    first = parse(generate_latest().decode(), pipeline)

    now[0] = published + timedelta(minutes=11)
    later = parse(generate_latest().decode(), pipeline)

    assert first is not None
    assert later is not None
    assert (first.oldest_age, later.oldest_age) == (5, 660)
    pubsub.held(0, None)
    emptied = parse(generate_latest().decode(), pipeline)
    assert emptied is not None
    assert emptied.oldest_age == 0


def test_before_its_first_commit_a_driver_reports_its_epoch_only() -> None:
    pipeline = f"ns-{uuid.uuid4().hex[:6]}/kpis"
    PrometheusObserver(pipeline).started("sluice-job:v1", epoch=2)
    report = parse(generate_latest().decode(), pipeline)
    assert report is not None
    assert (report.epoch, report.batch_id, report.committed_at) == (2, None, None)


def test_another_pipelines_series_are_not_this_pipelines_progress() -> None:
    PrometheusObserver(f"ns-{uuid.uuid4().hex[:6]}/other").started("sluice-job:v1", epoch=3)
    assert parse(generate_latest().decode(), "ns/absent") is None


def test_a_driver_waiting_for_a_dependency_reports_it_until_it_is_back() -> None:
    pipeline = f"ns-{uuid.uuid4().hex[:6]}/kpis"
    observer = PrometheusObserver(pipeline)
    observer.started("sluice-job:v1", epoch=3)
    observer.dependency("cassandra", available=False, detail="NoHostAvailable")
    report = parse(generate_latest().decode(), pipeline)
    assert report is not None
    assert report.unavailable == ("cassandra",)
    observer.dependency("cassandra", available=True)
    back = parse(generate_latest().decode(), pipeline)
    assert back is not None
    assert back.unavailable == ()


def test_records_skipped_for_retention_are_reported_per_partition() -> None:
    from sluice_job.planner import Skip

    pipeline = f"ns-{uuid.uuid4().hex[:6]}/kpis"
    observer = PrometheusObserver(pipeline)
    observer.started("sluice-job:v1", epoch=3)
    observer.skipped(Skip(TP1, 100, 150))
    report = parse(generate_latest().decode(), pipeline)
    assert report is not None
    assert report.lost == (("ui-events/1", 50),)


def test_a_checkpoint_beyond_a_partitions_end_is_reported_with_its_offsets() -> None:
    """Issue 12 item 5: before, a recreated topic was a skip of 0 records, which no
    metric, condition or Event showed."""
    from sluice_job.planner import Skip
    from sluice_operator.progress import OffsetReset

    pipeline = f"ns-{uuid.uuid4().hex[:6]}/kpis"
    observer = PrometheusObserver(pipeline)
    observer.started("sluice-job:v1", epoch=3)
    observer.skipped(Skip(TP0, 200, 0))
    report = parse(generate_latest().decode(), pipeline)
    assert report is not None
    assert report.lost == ()
    assert report.resets == (OffsetReset("ui-events/0", 1, committed=200, resumed_at=0),)
