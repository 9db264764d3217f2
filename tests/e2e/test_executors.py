"""End to end with executor pods: Spark's own Kubernetes backend runs the pipeline.

The driver pod (client mode, its pod's address as ``spark.driver.host``) asks the API
server for two executor pods of the job image; the real scheduler places them on the
test's two private nodes (the pipeline's anti-affinity keeps them apart), the node
agents run them as ``python -m sluice_job executor`` (the image's entrypoint with
Spark's argument), and every task of every batch runs in them. What a user checks:
the executor pods are visible while the pipeline runs, named after the pipeline and
the driver's epoch and owned by the driver pod; the sink holds every event once with
no overlapping batches, also when an executor is killed mid-stream (Spark reruns its
tasks and starts another); and deleting the pipeline removes driver and executors.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.nodeagent import control
from sluice_operator import naming
from tests.support.e2e import Setup, SinkReport, sink_report
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EXECUTORS = 2


def executor_pods(setup: Setup) -> list[Any]:
    selector = (
        f"{naming.LABEL_PIPELINE}={setup.pipeline.name},{naming.LABEL_ROLE}={naming.ROLE_EXECUTOR}"
    )
    pods = setup.pipeline.core.list_namespaced_pod(
        setup.pipeline.namespace, label_selector=selector
    ).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def running_executors(setup: Setup, count: int) -> list[Any] | None:
    pods = [p for p in executor_pods(setup) if p.status.phase == "Running"]
    return pods if len(pods) == count else None


def executor_pid(setup: Setup, pod: Any) -> int:
    for agent in setup.agents:
        for process in control.processes(setup.layout, port=agent.port):
            if process["pod"] == pod.metadata.name and process["exit_code"] is None:
                return int(process["pid"])
    raise AssertionError(f"no running process for {pod.metadata.name}")


def test_two_executor_pods_on_two_nodes_exact_through_an_executor_kill_then_deleted(
    setup: Setup,
) -> None:
    factory, count = EventFactory(seed=71), 9_000
    setup.operators.start()
    setup.kubectl.apply(setup.manifest("v1", executors=EXECUTORS))
    production = setup.produce(count, factory)
    status = setup.pipeline.wait_phase("Running", epoch=1, timeout=240)
    setup.wait_commit_by(1, timeout=300)

    executors = wait_for(
        lambda: running_executors(setup, EXECUTORS),
        timeout=120,
        what=f"{EXECUTORS} running executor pods",
    )
    print("\n" + setup.kubectl("get", "pods", "-n", setup.pipeline.namespace, "-o", "wide"))
    driver_pod = status["driverPod"]
    prefix = naming.executor_pod_prefix(setup.pipeline.name, 1)
    nodes = {pod.spec.node_name for pod in executors}
    assert nodes == {agent.node for agent in setup.agents}, "one executor on each node"
    for pod in executors:
        assert pod.metadata.name.startswith(f"{prefix}-exec-")
        [owner] = pod.metadata.owner_references
        assert (owner.kind, owner.name) == ("Pod", driver_pod)  # garbage-collected with it
        assert pod.metadata.labels[naming.LABEL_EPOCH] == "1"
        assert pod.spec.containers[0].args == ["executor"]
        assert pod.spec.security_context.run_as_non_root is True
        assert pod.spec.containers[0].security_context.read_only_root_filesystem is True
        assert pod.spec.automount_service_account_token is False

    victim = executors[0]
    os.kill(executor_pid(setup, victim), signal.SIGKILL)
    replacement = wait_for(
        lambda: (
            (pods := running_executors(setup, EXECUTORS))
            and victim.metadata.name not in {p.metadata.name for p in pods}
            and pods
        ),
        timeout=180,
        what="Spark to replace the killed executor with a new pod",
    )
    print(
        f"executor {victim.metadata.name} killed; now "
        + ", ".join(p.metadata.name for p in replacement)
    )
    assert production.running, "the executor was killed while events were being produced"

    setup.drained(production, timeout=300)
    report = sink_report(setup.cassandra, setup.keyspace, setup.pipeline_id, factory, count)
    print(report)
    assert report == SinkReport(count, count, missing=0, duplicates=0, wrong=0)
    assert setup.pipeline.status()["restarts"] == 0, "an executor's loss is not a driver restart"

    setup.pipeline.delete()
    wait_for(
        lambda: not setup.pipeline.live_pods() and not executor_pods(setup),
        timeout=180,
        what="the driver and executor pods to go with the pipeline",
    )
