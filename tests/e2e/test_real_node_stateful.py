"""Stateful pipelines on real nodes, driven by the operator: the unique-visitors
example (a window state), the sessions example (a session state; issue 41 item 4)
and the de-duplication example (a keyed state of the ids counted, its events re-sent
before and after the upgrade) in the job image, each through the loss of its
driver's node (the kubelet stopped, its container a zombie that a driver of a new
epoch fences) and a code upgrade made by patching the pipeline (v2's entrypoint and
a state with one more column: the operator stops v1 cleanly and starts v2). Every
window's distinct users (every session, every distinct event's KPIs, counted once)
are exact at the end, and v2's field exact where v2 saw the whole (set on the ids v2
counted first, null on v1's).

What the driver-level tests (``tests/integration/test_stateful_examples.py``,
``tests/integration/test_example_dedup.py``) could not show: the state's fence and
upgrade with the operator deciding, the drivers in containers of the job image on
two workers. Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.realnode import plan
from tests.support import state
from tests.support.fixtures import REAL_JOB_IMAGE
from tests.support.node_loss import Run, lose_the_drivers_node
from tests.support.operator import Pipeline
from tests.support.real_images import PARTITIONS, RealPlace
from tests.support.stateful_examples import EXAMPLES, HALF
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(1800)]


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_stateful_example_on_real_nodes_is_exact_through_a_lost_node_and_an_upgrade(
    name: str,
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    kube_stack: Layout,
    pipeline: Pipeline,
    cassandra: Any,
    kafka_topic: Any,
) -> None:
    example = EXAMPLES[name]
    bootstrap, topic, keyspace = real_place.bootstrap, real_place.topic, real_place.keyspace
    cassandra.execute(example.create.format(keyspace=keyspace), timeout=60)
    letters = kafka_topic(partitions=1)
    factory = example.factory(20261203)
    produce(bootstrap, topic, HALF // 2, factory=factory)
    spec = real_place.spec(REAL_JOB_IMAGE, example.module + "transform", cap=150)
    spec["sink"]["cassandra"]["table"] = example.table
    if example.options:
        spec["transform"]["options"] = dict(example.options)
    if example.lateness_seconds is not None:
        spec["transform"]["eventTime"] = {"allowedLatenessSeconds": example.lateness_seconds}
    spec["transform"]["state"] = [example.v1]
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

    def resend(phase: int) -> None:
        for seqs in example.resent[phase]:
            produce(bootstrap, topic, len(seqs), start=seqs.start, factory=factory)

    def rest_of_v1() -> None:
        produce(bootstrap, topic, HALF - HALF // 2, start=HALF // 2, factory=factory)
        resend(0)

    lose_the_drivers_node(pipeline, real_workers, kube_stack, run, rest_of_v1)
    ends = state.end_offsets(bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: state.committed(cassandra, keyspace, pipeline.checkpoint_key) == ends,
        timeout=400,
        what="v1 through the first half",
    )

    before = int(pipeline.status()["epoch"])
    pipeline.patch_spec({"transform": example.upgrade})
    pipeline.wait_phase("Running", timeout=400, epoch=before + 1)
    produce(bootstrap, topic, HALF, start=HALF, factory=factory)
    resend(1)
    if example.flush is not None:
        produce(bootstrap, topic, 1, start=example.flush, factory=factory)
    ends = state.end_offsets(bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: state.committed(cassandra, keyspace, pipeline.checkpoint_key) == ends,
        timeout=600,
        what=f"v2 at the topic's end offsets {ends}",
    )
    example.exact(cassandra, keyspace, bootstrap, (topic, letters), factory, 2 * HALF)
    history = run.history()
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
    assert {b.epoch for b in history} >= {1, before, before + 1}
