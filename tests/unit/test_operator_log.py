"""The operator's log says what it does and why: every Event it emits for an action
is also one log line, at info for a Normal one and at warning for a Warning one. A
chaos run's operator log held four lines for a run in which it started, promoted,
replaced and removed a dozen pods: only the warnings were logged."""

from __future__ import annotations

import json
import logging

import pytest

from sluice_api.logformat import JsonFormatter
from sluice_operator import reconcile
from sluice_operator.actions import Decision, Emit, RemovePod, WriteStatus
from sluice_operator.model import NodeView, Phase, PodPhase, PodView, Status
from tests.support.observations import observed

pytestmark = pytest.mark.unit


class Kube:
    """The API server, taking every action."""

    def __init__(self) -> None:
        self.applied: list[object] = []

    def apply(self, namespace: str, name: str, action: object, **kw: object) -> None:
        self.applied.append(action)


def test_every_event_the_operator_emits_is_a_log_line_at_its_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    promoted = Emit("Normal", "Promoted", "promoting standby kpis-driver-4 (epoch 4)")
    lost = Emit("Warning", "NodeLost", "node sluice-node-a of kpis-driver-3 lost for 5s")
    decision = Decision((lost, promoted, RemovePod("kpis-driver-3")))
    kube, seen = Kube(), observed(Status(phase=Phase.RUNNING, epoch=3))
    with caplog.at_level(logging.INFO, logger="sluice_operator"):
        reconcile._apply(kube, seen, decision, [])  # type: ignore[arg-type]

    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    where = f"{seen.namespace}/{seen.name}"
    assert lines == [
        (logging.WARNING, f"{where} NodeLost: {lost.message}"),
        (logging.INFO, f"{where} Promoted: {promoted.message}"),
    ]
    assert kube.applied == list(decision.actions)


def test_each_action_line_says_what_why_and_what_the_operator_saw(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 42, item 5: one JSON line per action with the pipeline, the action, the
    epoch it leads to, the reason and the observation that caused it, so a log
    search for a pipeline finds why its pods came and went."""
    killed = PodView("kpis-driver-3", 3, PodPhase.FAILED, node="n1", exit_code=137)
    seen = observed(
        Status(phase=Phase.RUNNING, epoch=3, driver_pod="kpis-driver-3"),
        (killed,),
        nodes={"n1": NodeView("n1", False)},
    )
    promoted = Emit("Normal", "Promoted", "kpis-driver-4 takes over from kpis-driver-3")
    after = Status(phase=Phase.RUNNING, epoch=4, driver_pod="kpis-driver-4")
    with caplog.at_level(logging.INFO, logger="sluice_operator"):
        reconcile._apply(Kube(), seen, Decision((promoted, WriteStatus(after))), [])  # type: ignore[arg-type]
    (line,) = [json.loads(JsonFormatter().format(r)) for r in caplog.records]
    assert line["pipeline"] == "ns/kpis"
    assert (line["action"], line["type"], line["epoch"]) == ("Promoted", "Normal", 4)
    assert line["reason"] == promoted.message
    assert line["observed"]["epoch"] == 3
    assert line["observed"]["pods"] == [
        {
            "name": "kpis-driver-3",
            "epoch": 3,
            "phase": "Failed",
            "exitCode": 137,
            "node": "n1",
            "nodeReady": False,
        }
    ]
