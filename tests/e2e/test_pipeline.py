"""End to end, everything real: ``kubectl apply`` a StreamingPipeline, the operator
(``python -m sluice_operator``) starts driver pods, the node agent runs them as real
``python -m sluice_job`` processes (Spark in local mode inside the "pod", the job
image's code from its code root), events flow from Kafka to Cassandra while a
producer keeps writing, and the faults a cluster sees happen on the way: driver
processes killed, a node partitioned away with its driver still running, a code
upgrade with the operator killed halfway, upgrades that fail and roll back.
Afterwards the sink holds every produced event exactly once, and the checkpoint
history shows batches that never overlap.

The driver pods run on two private nodes of the test (labelled with a pool only
its pipeline selects), so partitioning one disturbs nothing else.

Runs on the node agent, in ``make test``: real nodes are ``make test-node``'s, to keep
CI's cold run within its hour (they need ``make provision-nodes`` and the images
loaded into each worker). The node's side of these faults runs on real nodes there:
a killed container (``test_real_node_pipeline``), the node lost with its driver
running (``test_real_node_faults``), the clean stop through the kubelet
(``test_real_node_upgrade``). The operator killed halfway and the rollbacks are the
operator's own, the same on either node.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from sluice_dev import procs
from sluice_dev.events import EventFactory
from sluice_dev.nodeagent import control
from sluice_operator import naming
from tests.support import state
from tests.support.e2e import (
    JOB_IMAGE,
    UNTIL_STOPPED,
    Setup,
    SinkReport,
    batch_tags,
    sink_report,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def test_applied_pipeline_flows_shows_its_progress_and_survives_two_driver_kills(
    setup: Setup,
) -> None:
    factory = EventFactory(seed=61)
    setup.operators.start()
    applied = setup.kubectl.apply(setup.manifest("v1"))
    assert f"streamingpipeline.{naming.GROUP}/{setup.pipeline.name} created" in applied
    production = setup.produce(UNTIL_STOPPED, factory)

    setup.pipeline.wait_phase("Running", epoch=1, timeout=180)
    setup.wait_commit_by(1)
    wait_for(
        lambda: (setup.pipeline.status().get("lastCommit") or {}).get("batchId"),
        timeout=60,
        what="status.lastCommit while the driver runs",
    )
    table = setup.kubectl("get", "streamingpipelines", "-n", setup.pipeline.namespace, "-o", "wide")
    print(f"\n{table}")
    header, row = table.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "PHASE", "EPOCH", "IMAGE", "LAST"]
    assert row.split()[:4] == [setup.pipeline.name, "Running", "1", f"{JOB_IMAGE}:v1"]
    setup.kubectl(
        "wait",
        f"streamingpipeline/{setup.pipeline.name}",
        "-n",
        setup.pipeline.namespace,
        "--for=condition=Ready",
        "--timeout=30s",
    )

    for kill in range(1, 3):
        epoch = int(setup.pipeline.status()["epoch"])
        setup.wait_commit_by(epoch)
        _, pid = setup.driver_pid()
        os.kill(pid, signal.SIGKILL)
        setup.pipeline.wait_phase("Running", epoch=epoch + 1, timeout=180)
        print(f"kill {kill}: driver of epoch {epoch} (pid {pid}) killed, epoch {epoch + 1} runs")
    assert production.running, "the kills happened while events were being produced"

    count = setup.stop_and_drain(production)
    report = sink_report(setup.cassandra, setup.keyspace, setup.pipeline_id, factory, count)
    print(report)
    assert report == SinkReport(count, count, missing=0, duplicates=0, wrong=0)
    status = setup.pipeline.status()
    assert status["restarts"] == 2
    assert status["phase"] == "Running"


def test_partitioned_node_fails_over_and_its_still_running_driver_is_fenced(
    setup: Setup,
) -> None:
    factory = EventFactory(seed=62)
    setup.operators.start()
    setup.kubectl.apply(setup.manifest("v1"))
    production = setup.produce(UNTIL_STOPPED, factory)
    setup.pipeline.wait_phase("Running", epoch=1, timeout=180)
    setup.wait_commit_by(1)
    pod, zombie_pid = setup.driver_pid()
    lost = next(a for a in setup.agents if a.node == pod.spec.node_name)
    survivor = next(a for a in setup.agents if a is not lost)

    partitioned = time.monotonic()
    control.partition(setup.layout, lost.node, port=lost.port)
    status = setup.pipeline.wait_phase("Running", epoch=2, timeout=180)
    failover = time.monotonic() - partitioned
    (new,) = [p for p in setup.pipeline.pods() if p.metadata.name == status["driverPod"]]
    assert new.spec.node_name == survivor.node
    assert production.running, "the node was lost while events were being produced"

    def zombie_exit() -> tuple[int] | None:
        for process in control.processes(setup.layout, port=lost.port):
            if process["pod"] == pod.metadata.name and process["exit_code"] is not None:
                return (int(process["exit_code"]),)
        return None

    (code,) = wait_for(zombie_exit, timeout=180, what="the zombie driver to exit")
    assert code == 3, f"the zombie exited {code}, not 3 (fenced)"
    assert not procs.pid_alive(zombie_pid)
    zombie_batches, claimed_at = setup.zombie_batches(zombie=1, successor=2)
    assert zombie_batches, "the first driver committed before the partition"
    assert max(zombie_batches) <= claimed_at, "no commit by the zombie after the claim"
    print(
        f"\nfailover (partition -> epoch 2 Running): {failover:.1f}s; zombie exited {code} "
        f"after its last batch {max(zombie_batches)} (claim at batch {claimed_at})"
    )

    control.heal(setup.layout, lost.node, port=lost.port)
    count = setup.stop_and_drain(production)
    report = sink_report(setup.cassandra, setup.keyspace, setup.pipeline_id, factory, count)
    assert report == SinkReport(count, count, missing=0, duplicates=0, wrong=0)


def test_code_upgrade_with_the_operator_killed_halfway_then_two_bad_upgrades_rolled_back(
    setup: Setup,
) -> None:
    """v1 -> v2 with the operator killed halfway: v2 resumes at the next offset. Then
    two bad upgrades while events still flow, an image whose transform raises on every
    batch and an image that does not exist: each fails ``maxFailures`` (2) times and
    the operator runs v2, the last spec that committed, again. The sink ends with
    every event once, by v1 then v2, and no batch by either bad image."""
    factory = EventFactory(seed=63)
    first = setup.operators.start()
    setup.kubectl.apply(setup.manifest("v1"))
    production = setup.produce(UNTIL_STOPPED, factory)
    setup.pipeline.wait_phase("Running", epoch=1, timeout=180)
    setup.wait_commit_by(1)

    changed = time.monotonic()
    configured = setup.kubectl.apply(setup.manifest("v2"))
    assert "configured" in configured
    setup.pipeline.wait_phase("Upgrading", timeout=60)
    first.stop(signal.SIGKILL)

    def released_by_v1() -> bool:
        row = state.checkpoint_row(setup.cassandra, setup.keyspace, setup.pipeline_id)
        return bool(row is not None and row.released and row.epoch == 1)

    wait_for(
        released_by_v1,
        timeout=120,
        what="the v1 driver to finish its batch, commit and release the pipeline (operator down)",
    )
    setup.operators.start()
    status = setup.pipeline.wait_phase("Running", epoch=2, timeout=180)
    gap = time.monotonic() - changed
    assert status["image"] == f"{JOB_IMAGE}:v2"
    assert status["restarts"] == 0
    assert production.running, "the upgrade happened while events were being produced"
    setup.wait_commit_by(2)
    rollbacks = _bad_upgrades_roll_back(setup, good="v2")

    count = setup.stop_and_drain(production)
    report = sink_report(setup.cassandra, setup.keyspace, setup.pipeline_id, factory, count)
    assert report == SinkReport(count, count, missing=0, duplicates=0, wrong=0)
    history = state.history(setup.cassandra, setup.keyspace, setup.pipeline_id)
    versions = [row.code_version for row in history]
    switch = versions.index(f"{JOB_IMAGE}:v2")
    assert set(versions[:switch]) == {f"{JOB_IMAGE}:v1"}
    assert set(versions[switch:]) == {f"{JOB_IMAGE}:v2"}, "no v1 batch after the first v2 one"
    assert min(row.epoch for row in history[switch:]) == 2
    rows = state.events(setup.cassandra, setup.keyspace)
    written_by = batch_tags(setup.cassandra, setup.keyspace, setup.pipeline_id)
    assert len(written_by) == count
    mismatched = [
        event_id
        for event_id, version in written_by.items()
        if rows[event_id].tag != version.rsplit(":", 1)[1]
    ]
    assert mismatched == [], "every row carries the output of the code of its batch"
    v2_rows = sum(1 for version in written_by.values() if version.endswith(":v2"))
    print(
        f"\nupgrade (apply v2 -> epoch 2 Running, operator killed meanwhile): {gap:.1f}s; "
        f"{count - v2_rows} rows by v1, {v2_rows} by v2, switch at batch {history[switch].batch_id}"
        "; rollback (bad apply -> rolled-back v2 driver committing): "
        + ", ".join(f"{bad} {seconds:.1f}s" for bad, seconds in rollbacks)
    )
    assert 0 < v2_rows < count


def _bad_upgrades_roll_back(setup: Setup, good: str) -> list[tuple[str, float]]:
    """Apply the two bad images in turn; each rolls back to ``good``, whose driver
    then commits. Returns the seconds from each apply to that commit."""
    wait_for(
        lambda: (
            setup.pipeline.status().get("lastGoodSpec", {}).get("image") == f"{JOB_IMAGE}:{good}"
        ),
        timeout=60,
        what=f"{good} recorded as the last spec that committed",
    )
    expected_failure = {"broken": "the broken image's transform fails", "missing": "ImagePull"}
    timings = []
    for bad in ("broken", "missing"):
        applied = time.monotonic()
        change = setup.manifest(bad)
        change["spec"]["restart"] = {
            "backoffSeconds": 1,
            "maxFailures": 2,
            "startDeadlineSeconds": 20,
        }
        setup.kubectl.apply(change)
        image = f"{JOB_IMAGE}:{bad}"
        status = wait_for(
            lambda image=image: (  # type: ignore[misc]
                (s := setup.pipeline.status()).get("rolledBack", {}).get("image") == image and s
            ),
            timeout=300,
            what=f"the upgrade to {image} to roll back",
        )
        assert status["image"] == f"{JOB_IMAGE}:{good}"
        rolled = next(c for c in status["conditions"] if c["type"] == "RolledBack")
        assert rolled["status"] == "True"
        assert image in rolled["message"]
        assert expected_failure[bad] in status["rolledBack"]["reason"]
        setup.pipeline.wait_phase("Running", epoch=status["epoch"], timeout=180)
        setup.wait_commit_by(status["epoch"])
        timings.append((bad, time.monotonic() - applied))
    events = setup.pipeline.core.list_namespaced_event(setup.pipeline.namespace).items
    told = [e.message for e in events if e.reason == "RolledBack"]
    for bad, _ in timings:
        assert any(f"{JOB_IMAGE}:{bad}" in m for m in told), f"a RolledBack Event for {bad}"
    return timings
