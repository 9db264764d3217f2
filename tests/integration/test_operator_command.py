"""``sluice-dev operator start --namespace NS``, as a user runs it for a namespace of
their own: it applies the CRD, creates the namespace and runs an operator there in
the background (log in the stack directory); a second start keeps that one; a
pipeline created in the namespace gets its driver; ``operator stop`` ends it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import CoreV1Api, CustomObjectsApi

from sluice_dev import localrun, procs
from sluice_dev.paths import REPO_ROOT, Layout
from tests.support.operator import Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def sluice_dev(*args: str) -> str:
    """``sluice-dev ARGS`` in a process of its own (the test's stack, by its env)."""
    done = subprocess.run(
        [sys.executable, "-m", "sluice_dev", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def own_namespace(agent_stack: Layout, core: CoreV1Api, unique_name: Any) -> Iterator[str]:
    """A namespace name nobody has created; its operator stopped and it deleted after."""
    name = unique_name("own")[:50].rstrip("-")
    yield name
    sluice_dev("operator", "stop", "--namespace", name)
    core.delete_namespace(name)


def test_an_operator_started_for_a_fresh_namespace_runs_its_pipeline(
    agent_stack: Layout,
    standin_image: str,
    core: CoreV1Api,
    custom: CustomObjectsApi,
    own_namespace: str,
) -> None:
    started = sluice_dev("operator", "start", "--namespace", own_namespace)
    assert "/metrics on 127.0.0.1:" in started, started
    log = agent_stack.log(localrun.operator_process(own_namespace))
    assert str(log) in started
    assert log.exists()
    pid = procs.read_pid(agent_stack.pidfile(localrun.operator_process(own_namespace)))
    assert pid is not None
    again = sluice_dev("operator", "start", "--namespace", own_namespace)
    assert f"operator already running (pid {pid})" in again, again
    assert core.read_namespace(own_namespace).status.phase == "Active"

    pipeline = Pipeline(custom, core, own_namespace, "orders")
    pipeline.create(standin_spec(image=f"{standin_image}:v1"))
    status = pipeline.wait_phase("Running", timeout=120)
    assert [p.metadata.name for p in pipeline.live_pods()] == [status["driverPod"]]

    pipeline.delete()  # while its operator runs: its finalizer goes with it
    wait_for(lambda: pipeline.get() is None, timeout=60, what="the pipeline deleted")
    stopped = sluice_dev("operator", "stop", "--namespace", own_namespace)
    assert f"stopped (pid {pid})" in stopped, stopped
    assert not procs.pid_alive(pid)
    assert "not running" in sluice_dev("operator", "stop", "--namespace", own_namespace)
