"""End to end, warm handover upgrades (``spec.upgrade.mode: WarmHandover``) on the
local stack, with the fixtures of ``test_pipeline``, on one pipeline: a standby whose
transform fails its check never interrupts v1, and the pipeline says the upgrade
failed; then the v2 driver starts as a standby while v1 keeps committing, takes over
once v1 has released, and the sink holds every event once.

Runs on the node agent, in ``make test`` (CI's hour; see ``test_pipeline``). The
handover is between the drivers and the operator; the kubelet's part of an upgrade,
the old driver's stop through its container's entrypoint, is
``test_real_node_upgrade``'s.
"""

from __future__ import annotations

import json
import time
from datetime import UTC
from typing import Any

import pytest

from sluice_api import metrics as metric_names
from sluice_dev.events import EventFactory
from sluice_operator import progress
from tests.support import state
from tests.support.e2e import JOB_IMAGE, UNTIL_STOPPED, Setup, SinkReport, sink_report
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def warm(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["spec"]["upgrade"]["mode"] = "WarmHandover"
    return manifest


def _standby_state(setup: Setup) -> str | None:
    return (setup.pipeline.status().get("standby") or {}).get("state")


def _events(setup: Setup, reason: str) -> list[str]:
    found = setup.pipeline.core.list_namespaced_event(setup.pipeline.namespace).items
    return [e.message for e in found if e.reason == reason]


def _scraped(ip: str, name: str, pipeline: str) -> float | None:
    text = progress.fetch(ip, 8090, timeout=2.0)
    for line in (text or "").splitlines():
        if line.startswith(f'{name}{{pipeline="{pipeline}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_failed_standby_leaves_v1_running_then_a_warm_handover_is_exact_and_resumes(
    setup: Setup,
) -> None:
    """One pipeline, two warm upgrades while events flow. First to an image whose
    transform fails the standby's check: v1 is never interrupted, the standby's pod
    goes, the pipeline says the upgrade failed. Then to v2: it starts as a standby
    while v1 keeps committing, takes over once v1 has released, resumes at v1's last
    commit, serves its handover gap, and the sink holds every event once."""
    factory = EventFactory(seed=64)
    setup.operators.start()
    setup.kubectl.apply(warm(setup.manifest("v1")))
    production = setup.produce(UNTIL_STOPPED, factory)
    setup.pipeline.wait_phase("Running", epoch=1, timeout=180)
    setup.wait_commit_by(1)
    v1_pod = setup.pipeline.status()["driverPod"]
    assert v1_pod.endswith("-driver-1")

    _a_broken_standby_fails_and_v1_goes_on(setup, v1_pod)

    setup.kubectl.apply(warm(setup.manifest("v2")))
    wait_for(
        lambda: _standby_state(setup) == "Starting",
        timeout=60,
        what="the v2 driver to start as a standby",
    )
    standby = wait_for(  # the status names it before its pod exists (written ahead)
        lambda: next(
            (p for p in setup.pipeline.pods() if p.metadata.labels["sluice.dev/epoch"] == "3"),
            None,
        ),
        timeout=60,
        what="the v2 standby's pod",
    )
    created = standby.metadata.creation_timestamp
    assert setup.pipeline.status()["driverPod"] == v1_pod
    status = setup.pipeline.wait_phase("Running", epoch=3, timeout=300)
    assert status["image"] == f"{JOB_IMAGE}:v2"
    assert status["restarts"] == 0
    assert status.get("standby") is None
    assert production.running, "both upgrades happened while events were being produced"
    (condition,) = [c for c in status["conditions"] if c["type"] == "UpgradeFailed"]
    assert condition["status"] == "False", "the next spec change tried again, and it took"
    setup.wait_commit_by(3)
    (handed,) = _events(setup, "HandedOver")
    assert "which exited 0" in handed, "v1 stopped cleanly: it released, it was not fenced"

    count = setup.stop_and_drain(production)
    report = sink_report(setup.cassandra, setup.keyspace, setup.pipeline_id, factory, count)
    assert report == SinkReport(count, count, missing=0, duplicates=0, wrong=0)

    history = state.history(setup.cassandra, setup.keyspace, setup.pipeline_id)
    assert {row.epoch for row in history} == {1, 3}, "the broken standby committed nothing"
    ids = [row.batch_id for row in history]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "one chain of batch ids, none twice"
    epochs = [row.epoch for row in history]
    assert epochs == sorted(epochs), "no v1 batch after the first v2 one"
    last_v1 = max((row for row in history if row.epoch == 1), key=lambda r: r.batch_id)
    first_v2 = min((row for row in history if row.epoch == 3), key=lambda r: r.batch_id)
    assert first_v2.batch_id == last_v1.batch_id + 1
    after_v1 = _ends_after(history, last_v1.batch_id)
    starts = {
        int(partition): start
        for parts in json.loads(first_v2.ranges).values()
        for partition, (start, _) in parts.items()
    }
    assert starts, "the first v2 batch read records"
    assert all(starts[p] == after_v1[p] for p in starts), "v2 starts where v1 committed"
    (claim,) = [
        c for c in state.claims(setup.cassandra, setup.keyspace, setup.pipeline_id) if c.epoch == 3
    ]
    assert claim.batch_id_at_claim == last_v1.batch_id
    while_starting = [
        row for row in history if row.epoch == 1 and row.committed_at.replace(tzinfo=UTC) > created
    ]
    assert while_starting, "v1 kept committing while the standby started"

    gap = (first_v2.committed_at - last_v1.committed_at).total_seconds()
    (driver,) = [p for p in setup.pipeline.live_pods() if p.metadata.name == status["driverPod"]]
    pipeline_label = f"{setup.pipeline.namespace}/{setup.pipeline.name}"
    recorded = _scraped(driver.status.pod_ip, metric_names.HANDOVER_GAP, pipeline_label)
    assert recorded is not None, "the new driver serves its handover gap"
    assert abs(recorded - gap) < 1.0
    print(
        f"\nwarm handover: gap {gap:.2f}s (last v1 commit, batch {last_v1.batch_id} -> first "
        f"v2 commit, batch {first_v2.batch_id}; the driver's metric says {recorded:.2f}s); "
        f"v1 committed {len(while_starting)} batches while the standby started"
    )


def _a_broken_standby_fails_and_v1_goes_on(setup: Setup, v1_pod: str) -> None:
    """Apply the broken image: its standby fails the check, v1 (epoch 1) keeps running
    and committing, and the pipeline says the upgrade failed, in a condition and an
    Event."""
    setup.kubectl.apply(warm(setup.manifest("broken")))
    status = wait_for(
        lambda: (
            ((s := setup.pipeline.status()).get("standby") or {}).get("state") == "Failed" and s
        ),
        timeout=300,
        what="the broken standby to fail its check",
    )
    failed_at = time.time()
    assert (status["epoch"], status["driverPod"], status["phase"]) == (1, v1_pod, "Running")
    assert status["image"] == f"{JOB_IMAGE}:v1"
    (condition,) = [c for c in status["conditions"] if c["type"] == "UpgradeFailed"]
    assert condition["status"] == "True"
    assert f"{JOB_IMAGE}:broken" in condition["message"]
    assert "the broken image's transform fails on purpose" in condition["message"]
    told = _events(setup, "UpgradeFailed")
    assert any("the broken image's transform fails on purpose" in m for m in told)
    wait_for(
        lambda: [p.metadata.name for p in setup.pipeline.pods()] == [v1_pod],
        timeout=60,
        what="the failed standby's pod to be removed",
    )
    wait_for(
        lambda: any(
            row.epoch == 1 and row.committed_at.replace(tzinfo=UTC).timestamp() > failed_at
            for row in state.history(setup.cassandra, setup.keyspace, setup.pipeline_id)
        ),
        timeout=60,
        what="v1 to go on committing after the failed upgrade",
    )
    assert (setup.pipeline.status()["epoch"], setup.pipeline.status()["restarts"]) == (1, 0)


def _ends_after(history: list[Any], batch_id: int) -> dict[int, int]:
    """Per partition, the next offset to read once batch ``batch_id`` is committed."""
    ends: dict[int, int] = {}
    for row in history:
        if row.batch_id > batch_id:
            break
        for parts in json.loads(row.ranges).values():
            for partition, (_, end) in parts.items():
                ends[int(partition)] = int(end)
    return ends
