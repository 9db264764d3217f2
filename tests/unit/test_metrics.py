"""The metrics observer: what each loop event does to the exported series (read
back from the process's registry, as an exporter would serve them)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
import uuid

import pytest
from prometheus_client import REGISTRY

from sluice_job.batch import log_fields
from sluice_job.checkpoint import Batch
from sluice_job.metrics import Endpoint, PrometheusObserver
from sluice_job.offsets import OffsetRange, TopicPartition, Watermarks
from sluice_job.planner import Skip
from sluice_job.ports import Committed, PhaseTimes
from sluice_job.state_io import StateIO

pytestmark = pytest.mark.unit
TP0, TP1 = TopicPartition("ui-events", 0), TopicPartition("ui-events", 1)


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


@pytest.fixture
def observer() -> PrometheusObserver:
    """An observer of a pipeline of its own, so tests share no series."""
    watcher = PrometheusObserver(f"tests/{uuid.uuid4().hex[:8]}")
    watcher.started("ghcr.io/sluice-dev/sluice-job:0.1.0", epoch=4)
    return watcher


def test_start_publishes_the_epoch_and_zeroes(observer: PrometheusObserver) -> None:
    pipeline = observer.pipeline
    assert value("sluice_epoch", pipeline=pipeline) == 4
    assert value("sluice_batches_total", pipeline=pipeline) == 0
    assert value("sluice_batch_failures_total", pipeline=pipeline) == 0


def test_a_commit_counts_the_batch_its_records_and_each_phase(
    observer: PrometheusObserver,
) -> None:
    batch = Batch(7, (OffsetRange(TP0, 0, 100),), {TP0: 100})
    times = PhaseTimes(0.2, 0.3, 0.4, 90, records_in=100, records_rejected=10, dead_letter=0.05)
    observer.committed(Committed(batch, times, commit_seconds=0.01, batch_seconds=1.0))
    pipeline = observer.pipeline
    assert value("sluice_batches_total", pipeline=pipeline) == 1
    assert value("sluice_records_in_total", pipeline=pipeline) == 100
    assert value("sluice_records_out_total", pipeline=pipeline) == 90
    assert value("sluice_records_rejected_total", pipeline=pipeline) == 10
    assert value("sluice_last_committed_batch_id", pipeline=pipeline) == 7
    for phase, seconds in [("read", 0.2), ("write", 0.4), ("commit", 0.01)]:
        labels = {"pipeline": pipeline, "phase": phase}
        assert value("sluice_batch_phase_seconds_count", **labels) == 1
        assert value("sluice_batch_phase_seconds_sum", **labels) == pytest.approx(seconds)


def test_a_stateful_commit_reports_its_state_requests_in_metrics_and_its_log_line(
    observer: PrometheusObserver,
) -> None:
    batch = Batch(3, (OffsetRange(TP0, 0, 50),), {TP0: 50})
    io = StateIO(read_seconds=0.25, keys_read=80, write_seconds=0.5, keys_written=40)
    done = Committed(batch, PhaseTimes(0.1, 0.1, 1.0, 50, state=io), 0.01, 1.5)
    observer.committed(done)
    pipeline = observer.pipeline
    for request, seconds, keys in [("read", 0.25, 80), ("write", 0.5, 40)]:
        labels = {"pipeline": pipeline, "request": request}
        assert value("sluice_state_seconds_count", **labels) == 1
        assert value("sluice_state_seconds_sum", **labels) == pytest.approx(seconds)
        assert value("sluice_state_keys_total", **labels) == keys
    fields = log_fields(done, epoch=1, recovered=False)
    assert {k: v for k, v in fields.items() if k.startswith("state_")} == {
        "state_read_s": 0.25,
        "state_keys_read": 80,
        "state_write_s": 0.5,
        "state_keys_written": 40,
    }
    stateless = Committed(batch, PhaseTimes(0.1, 0.1, 1.0, 50), 0.01, 1.5)
    assert not [k for k in log_fields(stateless, epoch=1, recovered=False) if "state" in k]


def test_lag_is_the_high_watermark_minus_the_committed_position(
    observer: PrometheusObserver,
) -> None:
    observer.lag({TP0: Watermarks(10, 500), TP1: Watermarks(40, 90)}, {TP0: 450})
    pipeline = observer.pipeline
    assert value("sluice_consumer_lag", pipeline=pipeline, topic="ui-events", partition="0") == 50
    # never committed: everything retained is still to be read
    assert value("sluice_consumer_lag", pipeline=pipeline, topic="ui-events", partition="1") == 50


def test_a_fenced_batch_is_a_failure_and_a_commit_conflict(observer: PrometheusObserver) -> None:
    observer.failed(fenced=True)
    observer.failed(fenced=False)
    pipeline = observer.pipeline
    assert value("sluice_batch_failures_total", pipeline=pipeline) == 2
    assert value("sluice_commit_conflicts_total", pipeline=pipeline) == 1


def test_records_skipped_by_retention_are_counted_per_partition(
    observer: PrometheusObserver,
) -> None:
    observer.skipped(Skip(TP1, committed=100, resumed_at=160))
    labels = {"pipeline": observer.pipeline, "topic": "ui-events", "partition": "1"}
    assert value("sluice_records_skipped_total", **labels) == 60


def test_a_taken_port_delays_the_endpoint_instead_of_failing_the_driver() -> None:
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        endpoint = Endpoint(holder.getsockname()[1])
        endpoint.ensure()  # must not raise: the pipeline runs on
        assert not endpoint.serving
    endpoint.ensure()  # after a batch, once the port is free
    assert endpoint.serving
    with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=5) as page:
        assert b"sluice_batches_total" in page.read()


def test_the_endpoint_listens_on_the_pods_address_only() -> None:
    """Issue 22: metrics on the pod's IP (POD_IP, set by the operator), not on every
    address of the pod."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.2", 0))
        port = probe.getsockname()[1]
    endpoint = Endpoint(port, "127.0.0.2")
    endpoint.ensure()
    assert endpoint.serving
    with urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=5) as page:
        assert b"sluice_batches_total" in page.read()
    with pytest.raises(urllib.error.URLError, match="Connection refused"):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_the_driver_serves_metrics_on_the_address_the_operator_gives_it() -> None:
    from sluice_api import env as names
    from sluice_job.config import load
    from sluice_operator.builders import Owner, driver_env
    from tests.support.observations import spec

    env = {e["name"]: e for e in driver_env(Owner("p", "ns", "u", "cluster-1"), spec(), 1)}
    assert env[names.POD_IP] == {
        "name": "POD_IP",
        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
    }
    values = {k: e["value"] for k, e in env.items() if "value" in e}
    assert load({**values, names.POD_IP: "10.1.2.3"}).metrics_host == "10.1.2.3"
    assert load(values).metrics_host == ""  # outside a pod: every address
