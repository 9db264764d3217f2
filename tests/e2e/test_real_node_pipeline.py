"""A pipeline on real nodes: the operator's driver pod runs the job image built from
Dockerfile.job in a container under the pinned kubelet, reads the stack's Kafka,
writes its Cassandra and commits; its container is killed (every process of it,
SIGKILL, as an OOM kill or a crash would) and a driver of the next epoch takes over;
afterwards the sink holds every produced event exactly once.

What the node agent could not show: the image's entrypoint, ``PATH``, PySpark and
the JVM starting inside it on a read-only root as uid 185, the operator's pod
settings accepted by a kubelet, and a container's death reported by a kubelet.
Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from sluice_dev.realnode import plan
from tests.support import expected, state
from tests.support.fixtures import REAL_JOB_IMAGE
from tests.support.operator import Pipeline
from tests.support.real_images import PARTITIONS, RealPlace, kill_container, on_pod_network
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(900)]

SEED = 20261129

FIRST, SECOND = 3_000, 2_000


def test_a_pipeline_on_real_nodes_counts_every_event_once_through_a_killed_container(
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    pipeline: Pipeline,
    cassandra: Any,
) -> None:
    kafka_bootstrap, topic = real_place.bootstrap, real_place.topic
    cassandra_keyspace = real_place.keyspace
    factory = EventFactory(seed=SEED)
    produce(kafka_bootstrap, topic, FIRST, factory=factory)
    applied = time.monotonic()
    entrypoint = "sluice_job.examples.events:transform"
    pipeline.create(real_place.spec(REAL_JOB_IMAGE, entrypoint, cap=1_000))
    pipeline_id = pipeline.checkpoint_key

    wait_for(
        lambda: state.last_batch(cassandra, cassandra_keyspace, pipeline_id, 1) > 0,
        timeout=400,
        what="a batch committed by the first driver, in its container",
        ignoring=(InvalidRequest,),
    )
    first_commit = time.monotonic() - applied
    (pod,) = [p for p in pipeline.pods() if p.status.phase == "Running"]
    assert on_pod_network(real_workers, pod)
    worker = kill_container(real_workers, pod)
    killed = time.monotonic()

    produce(kafka_bootstrap, topic, SECOND, start=FIRST, factory=factory)
    wait_for(
        lambda: state.last_batch(cassandra, cassandra_keyspace, pipeline_id, 2) > 0,
        timeout=400,
        what="a batch committed by the next epoch's driver",
    )
    print(
        f"\napply -> first commit {first_commit:.1f}s on {worker.name}; "
        f"container killed -> next epoch's commit {time.monotonic() - killed:.1f}s"
    )
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == FIRST + SECOND
    wait_for(
        lambda: state.committed(cassandra, cassandra_keyspace, pipeline_id) == ends,
        timeout=400,
        what=f"the checkpoint at the topic's end offsets {ends}",
    )

    rows = state.events(cassandra, cassandra_keyspace)
    assert len(rows) == FIRST + SECOND
    assert expected.mismatched_events(rows, factory, FIRST + SECOND) == []
    history = state.history(cassandra, cassandra_keyspace, pipeline_id)
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
