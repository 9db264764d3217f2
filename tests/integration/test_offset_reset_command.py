"""``sluice offsets`` against the real control plane, with the operator and a
stand-in driver that reports commits: a reset asked from the command line stops the
driver cleanly, the next epoch takes it, and the command returns once the status says
it is in effect (issue 15 item 3; the driver's side is test_driver_offset_reset)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_dev.paths import Layout
from tests.support.operator import Operators, Pipeline, standin_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
SLUICE = Path(sys.executable).parent / "sluice"


@pytest.fixture(autouse=True)
def _stack(agent_stack: Any, standin_image: str) -> None:
    """Every test here needs the nodes and the stand-in image."""


def sluice(layout: Layout, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(layout.kubeconfig)}
    command = [str(SLUICE), "-n", namespace, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)


def context_user(layout: Layout) -> str:
    kubeconfig = yaml.safe_load(layout.kubeconfig.read_text())
    current = kubeconfig["current-context"]
    context = next(c for c in kubeconfig["contexts"] if c["name"] == current)
    return str(context["context"]["user"])


def test_a_reset_from_the_command_line_takes_effect_under_the_next_epoch(
    operators: Operators, pipeline: Pipeline, agent_stack: Layout
) -> None:
    operators.start()
    pipeline.create(standin_spec(metrics=True))
    pipeline.wait_phase("Running", epoch=1)

    done = sluice(
        agent_stack,
        pipeline.namespace,
        *("offsets", "reset", pipeline.name, "--to-datetime", "2026-11-24T10:00:00Z"),
        *("--reason", "replay after the fix", "--id", "replay-1", "--wait"),
    )
    assert done.returncode == 0, done.stderr
    assert "in effect since epoch 2" in done.stdout

    found = pipeline.get() or {}
    asked = found["spec"]["offsetReset"]
    assert asked["requestedBy"] == context_user(agent_stack)
    assert (asked["to"], asked["timestamp"]) == ("Timestamp", "2026-11-24T10:00:00Z")
    assert found["status"]["offsetReset"]["id"] == "replay-1"
    assert found["status"]["epoch"] == 2
    assert found["status"]["restarts"] == 0, "the driver before it stopped cleanly (exit 0)"
    (live,) = pipeline.live_pods()
    assert live.metadata.name == "kpis-driver-2"
    events = pipeline.core.list_namespaced_event(pipeline.namespace).items
    assert "Upgrading" in {e.reason for e in events}
    assert "DriverFailed" not in {e.reason for e in events}
    [told] = [e for e in events if e.reason == "OffsetReset"]
    assert told.message.startswith("offset reset replay-1 to Timestamp 2026-11-24T10:00:00Z")
    assert told.involved_object.uid == found["metadata"]["uid"]

    shown = sluice(agent_stack, pipeline.namespace, "offsets", "show", pipeline.name)
    assert shown.returncode == 0, shown.stderr
    assert "replay-1 to Timestamp 2026-11-24T10:00:00Z: in effect since epoch 2" in shown.stdout
    assert "replay after the fix" in shown.stdout


def test_a_wrong_reset_is_refused_by_name_and_changes_nothing(
    operators: Operators, pipeline: Pipeline, agent_stack: Layout
) -> None:
    operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    wrong = sluice(
        agent_stack,
        pipeline.namespace,
        *("offsets", "reset", pipeline.name, "--to-offset", "unused:zero=5", "--reason", "x"),
    )
    assert wrong.returncode == 2
    assert "--to-offset 'unused:zero=5': expected TOPIC:PARTITION=OFFSET" in wrong.stderr
    missing = sluice(
        agent_stack,
        pipeline.namespace,
        *("offsets", "reset", "nosuch", "--to-latest", "--reason", "x"),
    )
    assert missing.returncode == 1
    assert f"{pipeline.namespace}/nosuch: 404" in missing.stderr
    assert "offsetReset" not in (pipeline.get() or {})["spec"]
    assert pipeline.status()["epoch"] == 1
