"""The operator on the real control plane, with the node agent running stand-in
drivers: one driver per pipeline through exits, upgrades, suspends and deletes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sluice_dev import audit
from sluice_dev.paths import Layout
from sluice_dev.servers import kube
from sluice_operator.kube import USER_AGENT
from sluice_operator.settings import DEFAULTS
from tests.support.operator import Operators, Pipeline, standin_spec, terminated
from tests.support.scrape import scrape
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(autouse=True)
def _stack(agent_stack: Any, standin_image: str) -> None:
    """Every test here needs the nodes and the stand-in image."""


def test_created_pipeline_runs_one_driver(operators: Operators, pipeline: Pipeline) -> None:
    operators.start()
    pipeline.create(standin_spec())
    status = pipeline.wait_phase("Running", epoch=1)
    assert status["driverPod"] == "kpis-driver-1"
    (pod,) = pipeline.live_pods()
    assert pod.metadata.name == "kpis-driver-1"
    assert pod.spec.node_name
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"


IDLE_WINDOW = timedelta(seconds=15)


def test_an_idle_running_pipeline_costs_one_read_per_interval_and_no_write(
    operators: Operators, pipeline: Pipeline, agent_stack: Layout
) -> None:
    """Measured with the API server's audit log. Before the loop followed its
    decisions, a one-second timer read the pipeline, listed its pods and read its
    node every second: 45 reads in this window instead of at most 4."""
    operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    since = datetime.now(UTC) + timedelta(seconds=2)  # the Running write has landed
    until = since + IDLE_WINDOW
    time.sleep((until - datetime.now(UTC)).total_seconds())  # the measurement window
    wait_for(
        lambda: audit.requests(
            kube.audit_log(agent_stack), until, datetime.max.replace(tzinfo=UTC), ""
        ),
        timeout=30,
        what="the audit log to pass the window's end",
    )
    calls = audit.requests(kube.audit_log(agent_stack), since, until, USER_AGENT)
    kopf_calls = audit.requests(kube.audit_log(agent_stack), since, until, "kopf")
    assert [c for c in calls + kopf_calls if c.writes] == []
    interval = DEFAULTS.progress_seconds
    assert calls, "the loop still looks at the pipeline (its calls carry the user agent)"
    assert {(c.verb, c.resource, c.name) for c in calls} <= {
        ("get", "streamingpipelines", pipeline.name)
    }
    assert len(calls) <= IDLE_WINDOW.total_seconds() / interval + 1
    assert pipeline.status()["phase"] == "Running"
    print(
        f"\nidle Running pipeline, {IDLE_WINDOW.total_seconds():.0f}s: {len(calls)} operator "
        f"reads, {len(kopf_calls)} kopf calls, 0 writes (requeue {interval:.0f}s)"
    )


def test_failing_driver_is_restarted_with_a_new_epoch_after_backoff(
    operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    pipeline.create(standin_spec(exitCode=1, afterSeconds=0.5))
    status = wait_for(
        lambda: (s := pipeline.status()).get("epoch", 0) >= 3 and s,
        timeout=90,
        what="two restarts",
    )
    assert status["restarts"] >= 2
    exits = [terminated(p) for p in pipeline.pods() if terminated(p)]
    assert exits
    assert all(t.exit_code == 1 for t in exits)
    events = pipeline.core.list_namespaced_event(pipeline.namespace).items
    assert any(e.reason == "DriverFailed" for e in events)
    # What `kubectl describe sp` shows: the Events of the object with its uid (before,
    # they lacked involvedObject.uid and describe printed `Events: <none>`).
    uid = (pipeline.get() or {})["metadata"]["uid"]
    described = pipeline.core.list_namespaced_event(
        pipeline.namespace,
        field_selector=f"involvedObject.uid={uid},involvedObject.name={pipeline.name}",
    ).items
    assert "DriverFailed" in {e.reason for e in described}


def test_invalid_configuration_fails_at_once_with_the_drivers_message(
    operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    pipeline.create(standin_spec(exitCode=2, message="spec.sink.cassandra.table: no such table"))
    status = pipeline.wait_phase("Failed", timeout=60)
    assert "spec.sink.cassandra.table" in status["message"]
    assert status["epoch"] == 1  # not restarted


def test_image_change_stops_the_driver_cleanly_and_starts_the_new_image(
    operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    started = time.monotonic()
    pipeline.patch_spec({"image": "sluice-test/standin:v2"})
    status = pipeline.wait_phase("Running", epoch=2, timeout=90)
    gap = time.monotonic() - started
    assert status["image"] == "sluice-test/standin:v2"
    # The old driver exited 0 after SIGTERM: a clean stop, not a failure or restart.
    assert status["restarts"] == 0
    reasons = {e.reason for e in pipeline.core.list_namespaced_event(pipeline.namespace).items}
    assert "Upgrading" in reasons
    assert "DriverFailed" not in reasons
    (live,) = pipeline.live_pods()
    assert live.spec.containers[0].image == "sluice-test/standin:v2"
    print(f"\nupgrade gap (spec change -> new driver Running): {gap:.1f}s")
    metrics = scrape(operators.started[0].http_port)
    upgrades = metrics.value("sluice_operator_upgrade_duration_seconds_count")
    assert upgrades is not None
    assert upgrades >= 1
    assert metrics.value("sluice_operator_pipelines", phase="Running") == 1


def test_suspend_stops_the_driver_and_resume_starts_a_new_epoch(
    operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    pipeline.patch_spec({"suspend": True})
    pipeline.wait_phase("Suspended", timeout=60)
    assert pipeline.live_pods() == []
    pipeline.patch_spec({"suspend": False})
    pipeline.wait_phase("Running", epoch=2, timeout=60)


def test_deleted_pipeline_stops_its_driver_cleanly_then_goes(
    operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    pipeline.delete()
    wait_for(lambda: pipeline.get() is None, timeout=60, what="the pipeline to be gone")
    assert pipeline.live_pods() == []


def test_a_new_restart_nonce_restarts_the_driver_cleanly_with_the_next_epoch(
    operators: Operators, pipeline: Pipeline
) -> None:
    operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    pipeline.patch_spec({"restartNonce": "retry-1"})
    status = pipeline.wait_phase("Running", epoch=2, timeout=90)
    assert status["restarts"] == 0, "a clean stop, not a failure"
    exits = [terminated(p) for p in pipeline.pods() if terminated(p)]
    assert [t.exit_code for t in exits] in ([], [0])
