"""A code upgrade on real nodes: v1 → v2 of the end-to-end job, each a real image built
FROM the job image, under steady production. The operator stops v1 cleanly through
the kubelet (the pod deleted with its grace period: SIGTERM to the container's
entrypoint, which must reach the driver), and v2 resumes where v1 committed.

What the node agent could not show: the job image's entrypoint forwarding SIGTERM
to the driver inside a container, and the clean stop finishing within the pod's
grace period on a real kubelet. A v1 that did not stop cleanly would leave a planned
batch for v2 to recover ("recovering planned batch" in v2's log). Needs
``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import Background
from sluice_dev.realnode import plan
from tests.support import expected, state
from tests.support.operator import Pipeline
from tests.support.real_images import PARTITIONS, RealPlace, e2e_image
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(1200)]

SEED = 20261130

RATE = 100.0
COUNT = 1_000_000
"""More than the test lasts: production runs until the upgrade is done, then stops."""


def test_v1_stops_cleanly_in_its_container_and_v2_resumes_where_it_committed(
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    kube_stack: Layout,
    core: Any,
    pipeline: Pipeline,
    cassandra: Any,
) -> None:
    v1, v2 = (e2e_image(kube_stack, real_workers, version) for version in ("v1", "v2"))
    kafka_bootstrap, topic = real_place.bootstrap, real_place.topic
    cassandra_keyspace = real_place.keyspace
    factory = EventFactory(seed=SEED)
    production = Background(kafka_bootstrap, topic, COUNT, RATE, factory).start()
    pipeline.create(real_place.spec(v1, "sluice_e2e:transform", cap=500))
    pipeline_id = pipeline.checkpoint_key
    v1_epoch = int(
        wait_for(
            lambda: (pipeline.status().get("lastCommit") or {}).get("epoch"),
            timeout=400,
            what="a batch committed by v1 in its container",
        )
    )
    changed = time.monotonic()
    pipeline.patch_spec({"image": v2})

    def v2_committed() -> int | None:
        status = pipeline.status()
        epoch = int((status.get("lastCommit") or {}).get("epoch") or 0)
        return epoch if status.get("image") == v2 and epoch > v1_epoch else None

    v2_epoch = wait_for(v2_committed, timeout=400, what="a batch committed by v2")
    upgrade = time.monotonic() - changed
    (pod,) = [p for p in pipeline.pods() if p.status.phase == "Running"]
    assert pod.spec.containers[0].image == v2
    log = core.read_namespaced_pod_log(pod.metadata.name, pipeline.namespace)
    assert "recovering planned batch" not in log, "v1 left a planned batch: no clean stop"

    production.stop()
    produced = production.wait(120)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == produced
    wait_for(
        lambda: state.committed(cassandra, cassandra_keyspace, pipeline_id) == ends,
        timeout=400,
        what=f"the checkpoint at the topic's end offsets {ends}",
    )

    history = state.history(cassandra, cassandra_keyspace, pipeline_id)
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
    v1_end: dict[int, int] = {}  # where v1's committed batches end, per partition
    assert {b.epoch for b in history} >= {v1_epoch, v2_epoch}
    for batch in (b for b in history if b.epoch < v2_epoch):
        for parts in json.loads(batch.ranges).values():
            for partition, (_start, end) in parts.items():
                v1_end[int(partition)] = max(end, v1_end.get(int(partition), 0))
    rows = state.events(cassandra, cassandra_keyspace)
    assert len(rows) == produced
    for seq in range(produced):
        row = rows[f"e-{SEED}-{seq}"]
        got = (row.event_id, row.seq, row.page, row.user_id, row.event_time)
        want = expected.event_row(factory, seq)
        assert got == (want[0], want[1], want[2], want[4], want[5])
        after = row.source_offset >= v1_end.get(row.source_partition, 0)
        assert (row.tag, row.action) == (("v2", want[3].upper()) if after else ("v1", want[3]))
    print(
        f"\nv1 -> v2 on real nodes: spec change -> v2's first commit {upgrade:.1f}s; "
        f"{produced} events, {len(history)} batches"
    )
