"""Executor pods on real nodes through the faults of their nodes, an upgrade and the
loss of their driver's node, while events flow, and every event counted once at the
end.

One pipeline of the end-to-end job's image (v1, then v2) with two executor pods,
never two on one node (a required anti-affinity: one on each worker). Spark's
Kubernetes backend in the driver's container asks the API server for them with the
projected ServiceAccount token its kubelet mounted; every task of every batch runs
in them.

1. **An executor's node crashes** (the worker without the driver): its kubelet, its
   containerd and every process of its pods killed at once, its runtime state gone,
   as a power cut gives it. Spark loses the executor mid-stream and reruns its tasks
   on the other one; commits go on under the same epoch (an executor's loss is no
   driver restart). Once the worker is booted again, the kubelet removes the lost
   pod, and the replacement Spark asked for runs there.
2. **A clean-stop upgrade, v1 to v2**: the v1 driver's executors go with it, v2
   brings its own.
3. **The driver's node lost**: its kubelet stopped, its containers running on (the
   zombie driver, and its executor beside it). A driver of a new epoch claims the
   pipeline on the other worker; the old driver's executors, owned by its pod, are
   deleted with it (the one on the healthy worker killed by that worker's kubelet);
   the zombie commits nothing after the claim.

Then the sink holds every event once, as the code of the batch that wrote it made it,
and deleting the pipeline removes driver and executors.

What the node agent could not show: executor pods started by kubelets from the
image (the entrypoint's ``executor`` argument), dying with a crashed machine's
containerd and coming back after its boot, and a zombie driver's executors removed by
kubelets. Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev import stack
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import Background
from sluice_dev.realnode import plan, power
from sluice_dev.realnode.servers import kubelet_name
from tests.support import state
from tests.support.e2e import SinkReport, assert_executor_pod, executors_apart, sink_report
from tests.support.operator import Pipeline
from tests.support.real_images import (
    PARTITIONS,
    REAL_NODES,
    RealPlace,
    e2e_image,
    on_pod_network,
    worker_of,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(1800)]

SEED = 20261129
EXECUTORS = 2
RATE = 100.0
COUNT = 1_000_000
"""More than the test lasts: production runs until the faults are over, then stops."""


class Run:
    """The pipeline and its checkpoint, as the test reads them."""

    def __init__(self, pipeline: Pipeline, cassandra: Any, keyspace: str) -> None:
        self.pipeline, self.cassandra, self.keyspace = pipeline, cassandra, keyspace
        self.pipeline_id = pipeline.checkpoint_key

    def last_batch(self) -> int:
        return state.last_batch(self.cassandra, self.keyspace, self.pipeline_id)

    def commit_after(self, batch: int, what: str) -> float:
        """Wait for a batch committed after ``batch``; the seconds it took."""
        began = time.monotonic()
        wait_for(
            lambda: self.last_batch() > batch,
            timeout=400,
            what=f"a batch committed after batch {batch}: {what}",
            ignoring=(InvalidRequest,),  # the driver has not created its tables yet
        )
        return time.monotonic() - began

    def committed_by(self, epoch: int) -> bool:
        return state.last_batch(self.cassandra, self.keyspace, self.pipeline_id, epoch) > 0

    def fence(self) -> int:
        return state.fence(self.cassandra, self.keyspace, self.pipeline_id)

    def driver(self) -> Any:
        status = self.pipeline.status()
        (pod,) = [p for p in self.pipeline.live_pods() if p.metadata.name == status["driverPod"]]
        return pod


def test_executors_on_real_nodes_ride_out_their_nodes_crash_an_upgrade_and_a_lost_driver_node(
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    kube_stack: Layout,
    pipeline: Pipeline,
    cassandra: Any,
    driver_cluster_role: str,
) -> None:
    v1, v2 = (e2e_image(kube_stack, real_workers, version) for version in ("v1", "v2"))
    factory = EventFactory(seed=SEED)
    production = Background(real_place.bootstrap, real_place.topic, COUNT, RATE, factory).start()
    spec = real_place.spec(v1, "sluice_e2e:transform", cap=500)
    spec["spark"]["executors"] = {
        "instances": EXECUTORS,
        "cores": 1,
        "memory": "512m",
        "nodeSelector": REAL_NODES,
        "affinity": executors_apart(pipeline.name),
    }
    spec["failover"] = {"nodeLostSeconds": 5}
    pipeline.create(spec)
    run = Run(pipeline, cassandra, real_place.keyspace)
    run.commit_after(0, "v1's first, its tasks in the executors")

    _an_executors_node_crashes(run, kube_stack, real_workers)
    assert production.running, "the crash happened while events were being produced"

    changed = time.monotonic()
    pipeline.patch_spec({"image": v2})
    pipeline.wait_phase("Running", epoch=2, timeout=400)
    wait_for(lambda: run.committed_by(2), timeout=400, what="a batch committed by v2")
    wait_for(
        lambda: len(run.pipeline.executors_of(2)) == EXECUTORS and not run.pipeline.executors_of(1),
        timeout=300,
        what="v2's executors only",
    )
    print(
        f"v1 -> v2 with executors: spec change -> v2 with its own {time.monotonic() - changed:.1f}s"
    )

    _the_drivers_node_is_lost(run, kube_stack, real_workers)
    assert production.running, "the driver's node was lost while events were being produced"

    production.stop()
    produced = production.wait(120)
    ends = state.end_offsets(real_place.bootstrap, real_place.topic, PARTITIONS)
    assert sum(ends.values()) == produced
    wait_for(
        lambda: state.committed(cassandra, real_place.keyspace, run.pipeline_id) == ends,
        timeout=400,
        what=f"the checkpoint at the topic's end offsets {ends}",
    )
    report = sink_report(cassandra, real_place.keyspace, run.pipeline_id, factory, produced)
    print(report)
    assert report == SinkReport(produced, produced, missing=0, duplicates=0, wrong=0)
    history = state.history(cassandra, real_place.keyspace, run.pipeline_id)
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
    assert {b.code_version for b in history} == {v1, v2}
    by_zombie, claimed_at = state.zombie_batches(
        cassandra, real_place.keyspace, run.pipeline_id, zombie=2, successor=3
    )
    assert by_zombie, "the epoch 2 driver committed before its node was lost"
    assert max(by_zombie) <= claimed_at, "no commit by the zombie after the claim"

    pipeline.delete()
    wait_for(
        lambda: not pipeline.pods() and not pipeline.executor_pods(),
        timeout=300,
        what="the driver and executor pods to go with the pipeline",
    )


def _an_executors_node_crashes(run: Run, layout: Layout, workers: tuple[plan.Worker, ...]) -> None:
    """v1's executors as a user sees them, one on each worker; then the worker without
    the driver crashes and boots again."""
    executors = wait_for(
        lambda: run.pipeline.running_executors(EXECUTORS),
        timeout=300,
        what=f"{EXECUTORS} running executor pods",
    )
    driver = run.driver()
    assert {p.spec.node_name for p in executors} == {w.name for w in workers}, "one on each"
    for pod in executors:
        print(f"\n{pod.metadata.name:<40} {pod.status.pod_ip:<14} {pod.spec.node_name}", end="")
        assert_executor_pod(pod, run.pipeline.name, driver.metadata.name, epoch=1)
        assert on_pod_network(workers, pod), "on its pod's own address"
    print()

    lost_pod = next(p for p in executors if p.spec.node_name != driver.spec.node_name)
    lost = worker_of(workers, lost_pod)
    before = run.last_batch()
    killed = power.crash(layout, lost)
    print(f"{lost.name} crashed with {lost_pod.metadata.name} ({killed} processes killed)")
    try:
        took = run.commit_after(before, "on the one executor left")
        print(f"crash -> next commit {took:.1f}s, on the other worker's executor")
    finally:
        power.boot(layout, lost, say=lambda _line: None)
    healed = wait_for(
        lambda: run.pipeline.running_executors(EXECUTORS, without=lost_pod.metadata.name),
        timeout=400,
        what=f"{EXECUTORS} executors again once {lost.name} is back",
    )
    run.commit_after(run.last_batch(), "with the replacement executor")
    print(f"{lost.name} back: " + ", ".join(p.metadata.name for p in healed))
    status = run.pipeline.status()
    assert (status["epoch"], status["restarts"]) == (1, 0), (
        "an executor's loss is not a driver restart"
    )


def _the_drivers_node_is_lost(run: Run, layout: Layout, workers: tuple[plan.Worker, ...]) -> None:
    """The v2 driver's kubelet stopped: a driver of epoch 3 takes over on the other
    worker, epoch 2's executors go with its pod, the zombie is fenced."""
    driver = run.driver()
    lost = worker_of(workers, driver)
    began = time.monotonic()
    stack.stop(layout, kubelet_name(lost.index))
    try:
        wait_for(lambda: run.fence() == 3, timeout=400, what="the driver of epoch 3's claim")
        wait_for(lambda: run.committed_by(3), timeout=400, what="a batch committed by epoch 3")
        print(
            f"{lost.name} (the driver's) lost -> epoch 3's commit {time.monotonic() - began:.1f}s"
        )
        wait_for(
            lambda: not run.pipeline.executors_of(2),
            timeout=300,
            what="the fenced driver's executors to go with its pod",
        )
        assert run.driver().spec.node_name != lost.name, "the successor on the other worker"
    finally:
        stack.up(layout, [kubelet_name(lost.index)], say=lambda _line: None)
    wait_for(
        lambda: (
            run.pipeline.running_executors(EXECUTORS) is not None
            and len(run.pipeline.executors_of(3)) == EXECUTORS
        ),
        timeout=400,
        what=f"epoch 3's {EXECUTORS} executors once {lost.name} is back",
    )
    run.commit_after(run.last_batch(), "with both of epoch 3's executors")
