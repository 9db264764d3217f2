"""End to end, a hot standby (``spec.standby: 1``) on the local stack, with the
fixtures of ``test_pipeline`` (two private nodes): the standby starts beside the
running driver on the other node and reports Ready; the driver is SIGKILLed and the
standby, not a pod started from nothing, takes over within seconds; a new standby
starts; then the node of the new driver is partitioned away with that driver still
running, the standby on the other node is promoted and the partitioned driver, once
it tries to commit, exits fenced. The sink holds every event once throughout.

Runs on the node agent, in ``make test`` (CI's hour; see ``test_pipeline``). Which pod
stands by and which is promoted are the operator's decisions, the same on either node;
what a kubelet changes in the faults (a container's processes killed, a node lost
with its driver running) is shown on real nodes by ``test_real_node_pipeline`` and
``test_real_node_faults``.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.nodeagent import control
from tests.support import state
from tests.support.e2e import UNTIL_STOPPED, Setup, SinkReport, sink_report
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def hot(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["spec"]["standby"] = 1
    return manifest


def ready_standby(setup: Setup, epoch: int) -> Any:
    """The pod of the hot standby of ``epoch``, once the status says it is Ready."""

    def found() -> Any:
        standby = setup.pipeline.status().get("standby") or {}
        if standby.get("state") != "Ready" or standby.get("epoch") != epoch:
            return None
        return next(p for p in setup.pipeline.pods() if p.metadata.name == standby["pod"])

    return wait_for(found, timeout=300, what=f"the hot standby of epoch {epoch} to be Ready")


def pid_of(pod: Any) -> int:
    return int(pod.status.container_statuses[0].container_id.split("//")[1])


def first_commit(setup: Setup, epoch: int, timeout: float = 120) -> datetime:
    def committed() -> datetime | None:
        times = [
            row.committed_at.replace(tzinfo=UTC)
            for row in state.history(setup.cassandra, setup.keyspace, setup.pipeline_id)
            if row.epoch == epoch
        ]
        return min(times) if times else None

    return wait_for(committed, timeout=timeout, what=f"a commit by epoch {epoch}")


def events(setup: Setup, reason: str) -> list[str]:
    found = setup.pipeline.core.list_namespaced_event(setup.pipeline.namespace).items
    return [e.message for e in found if e.reason == reason]


def test_a_hot_standby_takes_over_from_a_killed_driver_then_from_a_partitioned_node_exactly(
    setup: Setup,
) -> None:
    factory = EventFactory(seed=66)  # produced until the faults are over (the partitioned
    # driver must find records to plan, and so meet its fence), then stopped
    operator = setup.operators.start()
    setup.kubectl.apply(hot(setup.manifest("v1")))
    production = setup.produce(UNTIL_STOPPED, factory)
    setup.pipeline.wait_phase("Running", epoch=1, timeout=180)
    setup.wait_commit_by(1)

    standby = ready_standby(setup, 2)
    (active,) = [p for p in setup.pipeline.pods() if p.metadata.name.endswith("-driver-1")]
    assert standby.spec.node_name != active.spec.node_name, "the standby runs on the other node"
    assert setup.pipeline.status()["driverPod"] == active.metadata.name

    os.kill(pid_of(active), signal.SIGKILL)
    killed = datetime.now(UTC)
    took_over = (first_commit(setup, 2) - killed).total_seconds()
    status = setup.pipeline.wait_phase("Running", epoch=2, timeout=60)
    assert status["driverPod"] == standby.metadata.name, "the standby was promoted"
    assert status["restarts"] == 1
    assert any(standby.metadata.name in m for m in events(setup, "Promoted"))
    # The operator's log says what it did, why, and what it saw (issue 42, item 5).
    (promotion,) = [d for d in operator.decisions("Promoted") if d["epoch"] == 2]
    assert active.metadata.name in promotion["reason"], promotion
    seen = {p["name"]: p for p in promotion["observed"]["pods"]}
    assert seen[active.metadata.name]["epoch"] == 1
    assert promotion["observed"]["standby"]["pod"] == standby.metadata.name
    assert production.running, "the kill happened while events were being produced"

    standby = ready_standby(setup, 3)
    (active,) = [p for p in setup.pipeline.live_pods() if p.metadata.name.endswith("-driver-2")]
    assert standby.spec.node_name != active.spec.node_name
    lost = next(a for a in setup.agents if a.node == active.spec.node_name)
    partitioned = time.monotonic()
    control.partition(setup.layout, lost.node, port=lost.port)
    assert production.running, "the partition happened while events were being produced"
    status = setup.pipeline.wait_phase("Running", epoch=3, timeout=120)
    assert status["driverPod"] == standby.metadata.name
    first_commit(setup, 3)
    failover = time.monotonic() - partitioned

    def zombie_exit() -> tuple[int] | None:
        for process in control.processes(setup.layout, port=lost.port):
            if process["pod"] == active.metadata.name and process["exit_code"] is not None:
                return (int(process["exit_code"]),)
        return None

    (code,) = wait_for(zombie_exit, timeout=180, what="the partitioned driver to exit")
    assert code == 3, f"the partitioned driver exited {code}, not 3 (fenced)"
    zombie_batches, claimed_at = setup.zombie_batches(zombie=2, successor=3)
    assert zombie_batches, "the driver of epoch 2 committed before the partition"
    assert max(zombie_batches) <= claimed_at, "no commit by the fenced driver after the claim"
    control.heal(setup.layout, lost.node, port=lost.port)

    count = setup.stop_and_drain(production)
    report = sink_report(setup.cassandra, setup.keyspace, setup.pipeline_id, factory, count)
    assert report == SinkReport(count, count, missing=0, duplicates=0, wrong=0)
    history = state.history(setup.cassandra, setup.keyspace, setup.pipeline_id)
    ids = [row.batch_id for row in history]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "one chain of batch ids, none twice"
    print(
        f"\nhot standby: SIGKILL -> first commit of the promoted standby {took_over:.1f}s; "
        f"partition -> first commit of the next one {failover:.1f}s (nodeLostSeconds 5); "
        f"the partitioned driver exited {code}"
    )
