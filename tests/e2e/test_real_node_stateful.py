"""A stateful pipeline on real nodes, driven by the operator: the unique-visitors
example (``sluice_job.examples.unique_visitors``, issue 41 item 4) in the job image,
through the loss of its driver's node (the kubelet stopped, its container a zombie
that a driver of a new epoch fences) and a code upgrade made by patching the
pipeline (v2's entrypoint and a state with one more column: the operator stops v1
cleanly and starts v2). Every window's distinct users are exact at the end, and v2's
views exact in the windows it saw whole.

What the driver-level test (``tests/integration/test_example_unique_visitors.py``)
could not show: the state's fence and upgrade with the operator deciding, the
drivers in containers of the job image on two workers. Needs ``SLUICE_NETNS=1``
(``make test-node``).
"""

from __future__ import annotations

from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.realnode import plan
from tests.support import state
from tests.support.fixtures import REAL_JOB_IMAGE
from tests.support.node_loss import Run, lose_the_drivers_node
from tests.support.operator import Pipeline
from tests.support.real_images import PARTITIONS, RealPlace
from tests.support.visitors import FLUSH, STATE_V1, STATE_V2, TABLE, assert_visitors_exact
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(1800)]

SEED = 20261203
HALF = 3_000
ENTRYPOINT = "sluice_job.examples.unique_visitors:"


def test_unique_visitors_on_real_nodes_are_exact_through_a_lost_node_and_an_upgrade(
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    kube_stack: Layout,
    pipeline: Pipeline,
    cassandra: Any,
    kafka_topic: Any,
) -> None:
    bootstrap, topic, keyspace = real_place.bootstrap, real_place.topic, real_place.keyspace
    cassandra.execute(TABLE.format(keyspace=keyspace), timeout=60)
    letters = kafka_topic(partitions=1)
    factory = EventFactory(seed=SEED)
    produce(bootstrap, topic, HALF // 2, factory=factory)
    spec = real_place.spec(REAL_JOB_IMAGE, ENTRYPOINT + "transform", cap=150)
    spec["sink"]["cassandra"]["table"] = "page_visitors"
    spec["transform"]["eventTime"] = {"allowedLatenessSeconds": 5}
    spec["transform"]["state"] = [STATE_V1]
    spec["deadLetter"] = {"kafka": {"topic": letters}}
    spec["failover"] = {"nodeLostSeconds": 5}
    pipeline.create(spec)
    run = Run(cassandra, keyspace, pipeline.checkpoint_key)
    wait_for(
        lambda: run.commits_by(1),
        timeout=400,
        what="a batch committed by the first driver",
        ignoring=(InvalidRequest,),
    )

    def rest_of_v1() -> None:
        produce(bootstrap, topic, HALF - HALF // 2, start=HALF // 2, factory=factory)

    lose_the_drivers_node(pipeline, real_workers, kube_stack, run, rest_of_v1)
    ends = state.end_offsets(bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: state.committed(cassandra, keyspace, pipeline.checkpoint_key) == ends,
        timeout=400,
        what="v1 through the first half",
    )

    before = int(pipeline.status()["epoch"])
    pipeline.patch_spec(
        {"transform": {"entrypoint": ENTRYPOINT + "transform_v2", "state": [STATE_V2]}}
    )
    pipeline.wait_phase("Running", timeout=400, epoch=before + 1)
    produce(bootstrap, topic, HALF, start=HALF, factory=factory)
    produce(bootstrap, topic, 1, start=FLUSH, factory=factory)
    ends = state.end_offsets(bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: state.committed(cassandra, keyspace, pipeline.checkpoint_key) == ends,
        timeout=600,
        what=f"v2 at the topic's end offsets {ends}",
    )
    assert_visitors_exact(cassandra, keyspace, bootstrap, (topic, letters), factory, 2 * HALF)
    history = run.history()
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
    assert {b.epoch for b in history} >= {1, before, before + 1}
