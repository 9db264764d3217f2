"""End to end with executor pods: Spark's own Kubernetes backend runs the pipeline.

The driver pod (client mode, its pod's address as ``spark.driver.host``) asks the API
server for two executor pods of the job image; the real scheduler places them on the
test's two private nodes (the pipeline's anti-affinity keeps them apart), the node
agents run them as ``python -m sluice_job executor`` (the image's entrypoint with
Spark's argument), and every task of every batch runs in them. What a user checks:
the executor pods are visible while the pipeline runs, named after the pipeline and
the driver's epoch and owned by the driver pod; the sink holds every event once with
no overlapping batches, also when an executor is killed mid-stream or its node
crashes (Spark reruns its tasks and starts another), through a clean-stop upgrade
(the new driver brings its own executors) and when the driver's node is partitioned
away (the old driver's executors go with its pod); and deleting the pipeline removes
driver and executors.

Runs on the node agent, in ``make test`` (CI's hour; see ``test_pipeline``). The same
faults on real nodes, executor pods run by kubelets from the image and a crashed
machine's containerd: ``test_real_node_executors`` (``make test-node``).
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.nodeagent import control
from sluice_dev.produce import Background
from tests.support import state
from tests.support.e2e import UNTIL_STOPPED, Setup, SinkReport, assert_executor_pod, sink_report
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EXECUTORS = 2


def executor_pid(setup: Setup, pod: Any) -> int:
    for agent in setup.agents:
        for process in control.processes(setup.layout, port=agent.port):
            if process["pod"] == pod.metadata.name and process["exit_code"] is None:
                return int(process["pid"])
    raise AssertionError(f"no running process for {pod.metadata.name}")


def assert_exact(setup: Setup, production: Background, factory: EventFactory) -> None:
    """The faults are over: stop producing, drain, and every event is in the sink once."""
    count = setup.stop_and_drain(production, timeout=300)
    report = sink_report(setup.cassandra, setup.keyspace, setup.pipeline_id, factory, count)
    print(report)
    assert report == SinkReport(count, count, missing=0, duplicates=0, wrong=0)


def last_batch(setup: Setup) -> int:
    rows = state.history(setup.cassandra, setup.keyspace, setup.pipeline_id)
    return max((row.batch_id for row in rows), default=-1)


def wait_new_commit(setup: Setup, after: int) -> None:
    wait_for(
        lambda: last_batch(setup) > after,
        timeout=180,
        what=f"a batch committed after batch {after}",
    )


def status_node(setup: Setup, pod_name: str) -> str:
    pod = setup.pipeline.core.read_namespaced_pod(pod_name, setup.pipeline.namespace)
    return str(pod.spec.node_name)


def test_executors_exact_through_an_executor_kill_its_node_crash_an_upgrade_and_a_partition(
    setup: Setup, driver_cluster_role: str
) -> None:
    """One pipeline with two executors, its faults one after the other while events
    flow: an executor killed and an executor's node crashed (Spark replaces them, no
    driver restart); a clean-stop upgrade (the v1 driver's executors go with it, v2
    starts its own); the driver's node lost (the operator replaces the driver, the old
    driver's executors, owned by its pod, are deleted with that pod, also the one on
    the healthy node, and the zombie driver commits nothing after the new claim).
    Then every event is in the sink once, and deleting the pipeline removes driver
    and executors."""
    factory = EventFactory(seed=71)
    setup.operators.start()
    setup.kubectl.apply(setup.manifest("v1", executors=EXECUTORS))
    production = setup.produce(UNTIL_STOPPED, factory)
    status = setup.pipeline.wait_phase("Running", epoch=1, timeout=240)
    setup.wait_commit_by(1, timeout=300)

    _executor_kill_and_node_crash(setup, status["driverPod"])
    assert production.running, "the executor faults happened while events were being produced"
    status = setup.pipeline.status()
    assert (status["epoch"], status["restarts"]) == (1, 0), (
        "an executor's loss is not a driver restart"
    )

    _upgrade_then_partition(setup)
    assert production.running, "the driver's node was lost while events were being produced"

    assert_exact(setup, production, factory)
    by_zombie, claimed_at = setup.zombie_batches(zombie=2, successor=3)
    assert by_zombie, "the epoch 2 driver committed before its node was lost"
    assert max(by_zombie) <= claimed_at, "no commit by the zombie after the claim"

    setup.pipeline.delete()
    wait_for(
        lambda: not setup.pipeline.live_pods() and not setup.pipeline.executor_pods(),
        timeout=180,
        what="the driver and executor pods to go with the pipeline",
    )


def _executor_kill_and_node_crash(setup: Setup, driver_pod: str) -> None:
    """v1's two executors, one on each node, as a user sees them; one killed, then the
    node of one (not the driver's) crashed: Spark replaces them and commits go on."""
    executors = wait_for(
        lambda: setup.pipeline.running_executors(EXECUTORS),
        timeout=120,
        what=f"{EXECUTORS} running executor pods",
    )
    print("\n" + setup.kubectl("get", "pods", "-n", setup.pipeline.namespace, "-o", "wide"))
    nodes = {pod.spec.node_name for pod in executors}
    assert nodes == {agent.node for agent in setup.agents}, "one executor on each node"
    for pod in executors:
        assert_executor_pod(pod, setup.pipeline.name, driver_pod, epoch=1)

    victim = executors[0]
    os.kill(executor_pid(setup, victim), signal.SIGKILL)
    replacement = wait_for(
        lambda: setup.pipeline.running_executors(EXECUTORS, without=victim.metadata.name),
        timeout=180,
        what="Spark to replace the killed executor with a new pod",
    )
    print(
        f"executor {victim.metadata.name} killed; now "
        + ", ".join(p.metadata.name for p in replacement)
    )

    # The node of an executor (not the driver's) crashes: its processes die with it.
    # Spark loses the executor mid-stream, reruns its tasks on the other one and asks
    # for a replacement, which the scheduler places once the node is back (the other
    # node already has one of the pipeline's executors).
    lost_pod = next(p for p in replacement if p.spec.node_name != status_node(setup, driver_pod))
    lost = next(a for a in setup.agents if a.node == lost_pod.spec.node_name)
    crashed_at = last_batch(setup)
    control.crash(setup.layout, lost.node, port=lost.port)
    wait_new_commit(setup, crashed_at)  # on the one executor left
    control.heal(setup.layout, lost.node, port=lost.port)
    healed = wait_for(
        lambda: setup.pipeline.running_executors(EXECUTORS, without=lost_pod.metadata.name),
        timeout=180,
        what=f"{EXECUTORS} executors again once {lost.node} is back",
    )
    wait_new_commit(setup, last_batch(setup))
    print(
        f"{lost.node} crashed with {lost_pod.metadata.name}; after it is back: "
        + ", ".join(p.metadata.name for p in healed)
    )


def _upgrade_then_partition(setup: Setup) -> None:
    """A clean-stop upgrade: the v1 driver's executors go with it, v2 starts its own.
    Then the driver's node is lost: the operator replaces the driver (epoch 3), and
    the old driver's executors (owned by its pod) are deleted with that pod, also the
    one on the healthy node."""
    setup.kubectl.apply(setup.manifest("v2", executors=EXECUTORS))
    status = setup.pipeline.wait_phase("Running", epoch=2, timeout=240)
    setup.wait_commit_by(2, timeout=300)
    wait_for(
        lambda: (
            len(setup.pipeline.executors_of(2)) == EXECUTORS and not setup.pipeline.executors_of(1)
        ),
        timeout=180,
        what="v2's executors only",
    )
    print("\n" + setup.kubectl("get", "pods", "-n", setup.pipeline.namespace, "-o", "wide"))

    driver_node = status_node(setup, status["driverPod"])
    lost = next(a for a in setup.agents if a.node == driver_node)
    control.partition(setup.layout, lost.node, port=lost.port)
    setup.pipeline.wait_phase("Running", epoch=3, timeout=240)
    wait_for(
        lambda: not setup.pipeline.executors_of(2),
        timeout=180,
        what="the fenced driver's executors to go with its pod",
    )
    setup.wait_commit_by(3, timeout=300)
    print(f"{lost.node} (the driver's) partitioned: epoch 3 runs, epoch 2's executors gone")
    control.heal(setup.layout, lost.node, port=lost.port)
    wait_new_commit(setup, last_batch(setup))
