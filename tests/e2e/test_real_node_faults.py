"""A pipeline on real nodes through the faults of its node, one after another, each
as a machine or a network gives it, and every event counted once at the end:

1. **The kubelet restarted** under the running driver: the node stays Ready, the
   driver's container is not restarted, and the same epoch goes on committing.
2. **The driver pod's network cut** for :data:`CUT_SECONDS` (every packet dropped in
   the pod's namespace, no reset: connections hang): nothing is committed from that
   pod while it is cut off, and once the network is back the pipeline goes on by
   itself.
3. **The driver's node lost**: its kubelet stops, so heartbeats stop while its
   container runs on (a zombie); a driver of a new epoch claims the pipeline on the
   other worker and commits, and the zombie commits nothing after the claim. Its
   container ends: the zombie exits when its commit is refused (``Fenced``), or the
   kubelet, back, finds its pod deleted and kills it.

What the node agent could not show: a real kubelet's restart adopting running
containers, a real pod network namespace cut off, and a zombie that is a container
the kubelet itself removes. Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev import stack
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.realnode import faults, plan
from sluice_dev.realnode.servers import kubelet_name
from sluice_dev.servers import kube
from tests.support import expected, state
from tests.support.fixtures import REAL_JOB_IMAGE
from tests.support.node_loss import Run, lose_the_drivers_node, running_driver
from tests.support.operator import Pipeline
from tests.support.real_images import PARTITIONS, RealPlace, worker_of
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(1500)]

SEED = 20261130

BATCH = 1_000
"""Events produced before each fault and after the last."""
CUT_SECONDS = 30.0
"""How long the driver's pod is cut off: longer than a batch and a commit."""
CLOCK_SLACK = timedelta(seconds=2)
"""Cassandra's commit time against this process's clock (one machine): a commit
already on its way when the network went is stamped within this of the cut."""


def _observe(pipeline: Pipeline, seconds: float) -> list[str]:
    """The pipeline's status changes over ``seconds`` (the length of a fault), each
    once: phase, epoch and the conditions not in their usual state."""
    seen: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        status = pipeline.status()
        unusual = [
            f"{c['type']}={c['status']}:{c.get('reason', '')}"
            for c in status.get("conditions") or []
            if (c["type"] == "Ready") != (c["status"] == "True")
        ]
        line = f"{status.get('phase')} epoch {status.get('epoch')} {' '.join(unusual)}"
        if line not in seen:
            seen.append(line)
        time.sleep(1.0)
    return seen


def test_a_pipeline_on_real_nodes_rides_out_a_kubelet_restart_a_network_cut_and_a_lost_node(
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    kube_stack: Layout,
    pipeline: Pipeline,
    cassandra: Any,
) -> None:
    kafka_bootstrap, topic = real_place.bootstrap, real_place.topic
    cassandra_keyspace = real_place.keyspace
    factory = EventFactory(seed=SEED)
    produced = 0

    def more() -> None:
        nonlocal produced
        produce(kafka_bootstrap, topic, BATCH, start=produced, factory=factory)
        produced += BATCH

    more()
    spec = real_place.spec(REAL_JOB_IMAGE, "sluice_job.examples.events:transform", cap=250)
    spec["failover"] = {"nodeLostSeconds": 5}
    pipeline.create(spec)
    run = Run(cassandra, cassandra_keyspace, pipeline.checkpoint_key)
    wait_for(
        lambda: run.commits_by(1),
        timeout=400,
        what="a batch committed by the first driver",
        ignoring=(InvalidRequest,),
    )

    # 1. The kubelet restarted under the running driver.
    pod = wait_for(lambda: running_driver(pipeline), timeout=60, what="the running driver")
    worker = worker_of(real_workers, pod)
    before = run.last_batch()
    began = time.monotonic()
    stack.stop(kube_stack, kubelet_name(worker.index))
    stack.up(kube_stack, [kubelet_name(worker.index)], say=lambda _line: None)
    print(f"\nkubelet of {worker.name} restarted in {time.monotonic() - began:.1f}s")
    more()
    wait_for(
        lambda: run.commits_by(1, after=before),
        timeout=300,
        what="the same driver committing after its kubelet's restart",
    )
    (again,) = [p for p in pipeline.live_pods() if p.metadata.name == pod.metadata.name]
    assert again.metadata.uid == pod.metadata.uid, "the same pod, not a new one"
    assert again.status.container_statuses[0].restart_count == 0, "its container kept running"
    assert kube.node_problem(kube_stack, worker.name) is None, "the node is Ready"
    assert pipeline.status()["epoch"] == 1

    # 2. The driver pod's network cut, then healed.
    cut_from = datetime.now(UTC)
    namespace = faults.cut(pod.status.pod_ip)
    try:
        assert faults.is_cut(namespace)
        more()
        seen = _observe(pipeline, CUT_SECONDS)
        print("during the cut:", *seen, sep="\n  ")
    finally:
        faults.heal(namespace)
    healed = datetime.now(UTC)
    late = run.committed_between(1, cut_from + CLOCK_SLACK, healed)
    assert late == [], f"batches {late} committed by the cut-off driver"
    before = run.last_batch()
    more()
    wait_for(
        lambda: run.last_batch() > before,
        timeout=400,
        what="a commit after the network came back",
    )
    resumed = (datetime.now(UTC) - healed).total_seconds()
    print(f"network cut {CUT_SECONDS:.0f}s, healed -> next commit {resumed:.1f}s")

    # 3. The driver's node lost: its kubelet stopped, its container a zombie.
    lose_the_drivers_node(pipeline, real_workers, kube_stack, run, more)

    # Every event once, batches one after another.
    more()
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == produced
    wait_for(
        lambda: state.committed(cassandra, cassandra_keyspace, pipeline.checkpoint_key) == ends,
        timeout=400,
        what=f"the checkpoint at the topic's end offsets {ends}",
    )
    rows = state.events(cassandra, cassandra_keyspace)
    assert len(rows) == produced
    assert expected.mismatched_events(rows, factory, produced) == []
    history = run.history()
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
