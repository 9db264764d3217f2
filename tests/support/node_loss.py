"""A pipeline's driver on real nodes, as the fault tests find it and take its node
away: the running driver pod, its processes on the worker, its last log event, and
the pipeline's checkpoint history the tests read."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sluice_dev import stack
from sluice_dev.paths import Layout
from sluice_dev.realnode import plan, runtime
from sluice_dev.realnode.servers import kubelet_name
from tests.support import state
from tests.support.operator import Pipeline
from tests.support.real_images import worker_of
from tests.support.waiting import wait_for


def running_driver(pipeline: Pipeline) -> Any | None:
    running = [p for p in pipeline.live_pods() if p.status.phase == "Running"]
    status = pipeline.status()
    for pod in running:
        if pod.metadata.name == status.get("driverPod"):
            return pod
    return None


def driver_pids(worker: plan.Worker, pod: Any) -> set[int]:
    container = pod.status.container_statuses[0]
    return runtime.container_pids(worker, pod.metadata.uid, container.container_id.split("//")[-1])


def last_words(worker: plan.Worker, pod: Any) -> str:
    """The zombie's last log event, from its container's log on the worker (its pod
    is gone from the API): ``Fenced`` when it tried to commit after the claim."""
    meta = pod.metadata
    logs = worker.data / plan.POD_LOGS / f"{meta.namespace}_{meta.name}_{meta.uid}"
    events = [
        line.split('"event": "', 1)[1].split('"', 1)[0]
        for log in sorted(logs.glob("*/*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if '"event": "' in line
    ]
    return events[-1] if events else "no log"


class Run:
    """The pipeline's checkpoint as the test reads it."""

    def __init__(self, cassandra: Any, keyspace: str, pipeline_id: str) -> None:
        self.cassandra, self.keyspace, self.pipeline_id = cassandra, keyspace, pipeline_id

    def history(self) -> list[Any]:
        return state.history(self.cassandra, self.keyspace, self.pipeline_id)

    def commits_by(self, epoch: int, after: int = 0) -> bool:
        """A batch after batch id ``after`` committed by ``epoch``."""
        return any(r.epoch == epoch and r.batch_id > after for r in self.history())

    def fence(self) -> int:
        """The epoch the checkpoint row holds: the last driver to claim the pipeline."""
        return state.fence(self.cassandra, self.keyspace, self.pipeline_id)

    def last_batch(self) -> int:
        return max((r.batch_id for r in self.history()), default=0)

    def committed_between(self, epoch: int, since: datetime, until: datetime) -> list[int]:
        return [
            r.batch_id
            for r in self.history()
            if r.epoch == epoch and since < r.committed_at.replace(tzinfo=UTC) < until
        ]


def lose_the_drivers_node(
    pipeline: Pipeline,
    workers: Sequence[plan.Worker],
    layout: Layout,
    run: Run,
    after_claim: Callable[[], None],
) -> str:
    """The running driver's node lost: its kubelet stopped, so heartbeats stop while
    its container runs on (a zombie). Waits for a driver of a new epoch to claim the
    pipeline (then calls ``after_claim``) and commit on the other worker, brings the
    kubelet back, waits for the zombie's container to end and checks it committed
    nothing after the claim; returns the zombie's last log event."""
    pod = wait_for(lambda: running_driver(pipeline), timeout=300, what="a running driver")
    worker = worker_of(workers, pod)
    epoch = int(pipeline.status()["epoch"])
    zombie = driver_pids(worker, pod)
    assert zombie, "the driver's processes, in its container's cgroup"
    began = time.monotonic()
    stack.stop(layout, kubelet_name(worker.index))
    try:
        wait_for(
            lambda: run.fence() > epoch,
            timeout=300,
            what="a driver of a new epoch claiming the pipeline",
        )
        claimed = datetime.now(UTC)
        after_claim()  # the zombie, until then the driver, may read what was there before
        wait_for(
            lambda: any(r.epoch > epoch for r in run.history()),
            timeout=400,
            what="a batch committed by a driver of a new epoch",
        )
        print(f"node lost -> new epoch's commit {time.monotonic() - began:.1f}s")
        successor = wait_for(lambda: running_driver(pipeline), timeout=60, what="the driver")
        assert successor.spec.node_name != worker.name, "the successor is on the other worker"
    finally:
        stack.up(layout, [kubelet_name(worker.index)], say=lambda _line: None)
    wait_for(
        lambda: not (driver_pids(worker, pod) & zombie),
        timeout=120,
        what="the zombie's container gone (fenced, it exits; else its kubelet kills it)",
    )
    words = last_words(worker, pod)
    print(f"the zombie: {words}")
    late = run.committed_between(epoch, claimed, datetime.now(UTC))
    assert late == [], f"batches {late} committed by the zombie after its successor's claim"
    return words
