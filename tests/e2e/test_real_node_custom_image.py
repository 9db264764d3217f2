"""A user's own code on real nodes, in executors: ``examples/custom-transform`` built by
its own Dockerfile FROM the job image (podman, as the example's README builds it with
docker) and loaded into both workers; the example's pipeline names that image with two
executor pods. The driver's Spark (client mode, its pod's address as
``spark.driver.host``) asks the API server for the executor pods with the projected
ServiceAccount token a real kubelet mounted, through the ``kubernetes`` Service that
kube-proxy routes; the kubelets run them from the derived image, and they connect
back to the driver's pod address (across the workers when the scheduler puts them on
the other one; ``test_real_node`` checks pod-to-pod traffic between workers as such).
With executors the driver has
no task slots of its own, so every batch's transform runs in them: the user's
package, which exists only in the derived image. One executor's container is
killed (SIGKILL); Spark replaces its pod and commits go on. At the end the sink holds
exactly the rows the example's documented rules make of the events, and the
dead-letter topic exactly the malformed records, with their reasons.

What the node agent could not show: a derived image's layers over the job image's
(the package in the job's virtualenv, the entrypoint inherited), and executor pods
placed and started by kubelets, fetching the driver's jars into a working directory
of a read-only root (it found the one runc made unwritable).
Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.realnode import plan
from tests.support import clickscore, state
from tests.support.operator import Pipeline
from tests.support.real_images import (
    CLICKSCORE,
    PARTITIONS,
    REAL_NODES,
    RealPlace,
    kill_container,
    on_pod_network,
    on_workers,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(1200)]

EXECUTORS = 2
FIRST, SECOND = 2_000, 1_000


def test_a_derived_image_runs_the_users_code_in_executor_pods_on_real_nodes(
    kube_stack: Layout,
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    pipeline: Pipeline,
    kafka_topic: Any,
    cassandra: Any,
    core: Any,
    driver_cluster_role: str,
) -> None:
    started = time.monotonic()
    image = on_workers(kube_stack, real_workers, CLICKSCORE)
    built = time.monotonic() - started
    keyspace = real_place.keyspace
    dead_letters = kafka_topic(partitions=1)
    clickscore.create_sink_table(cassandra, keyspace)
    body = clickscore.localized(
        name=pipeline.name,
        namespace=pipeline.namespace,
        image=image,
        bootstrap=real_place.bootstrap,
        topic=real_place.topic,
        dead_letters=dead_letters,
        contact=real_place.contact,
        keyspace=keyspace,
        executors=EXECUTORS,
        node_selector=REAL_NODES,
    )
    factory = EventFactory(seed=72, bad_every=10)
    produce(real_place.bootstrap, real_place.topic, FIRST, factory=factory)
    applied = time.monotonic()
    pipeline.create(body["spec"])
    pipeline_id = pipeline.checkpoint_key

    executors = wait_for(
        lambda: pipeline.running_executors(EXECUTORS),
        timeout=400,
        what=f"{EXECUTORS} running executor pods of {image}",
    )
    (driver,) = [p for p in pipeline.pods() if p.status.phase == "Running"]
    assert {pod.spec.containers[0].image for pod in [driver, *executors]} == {image}
    # Where the scheduler puts them is its own choice (the anti-affinity is preferred):
    # apart, or both beside the driver, or both on the other worker.
    assert {pod.spec.node_name for pod in executors} <= {w.name for w in real_workers}
    assert all(on_pod_network(real_workers, pod) for pod in [driver, *executors]), (
        "driver and executors on their pods' own addresses"
    )
    for pod in [driver, *executors]:
        print(f"\n{pod.metadata.name:<40} {pod.status.pod_ip:<14} {pod.spec.node_name}", end="")
    wait_for(
        lambda: state.last_batch(cassandra, keyspace, pipeline_id) > 0,
        timeout=400,
        what="a batch committed, its tasks in the executors",
        ignoring=(InvalidRequest,),  # the driver has not created its tables yet
    )
    first_commit = time.monotonic() - applied
    for pod in executors:  # kubectl logs, through the pod's kubelet
        log = core.read_namespaced_pod_log(pod.metadata.name, pipeline.namespace)
        assert "Successfully registered with driver" in log, log[-2000:]

    victim = executors[0]
    kill_container(real_workers, victim)
    killed, before = time.monotonic(), state.last_batch(cassandra, keyspace, pipeline_id)
    produce(real_place.bootstrap, real_place.topic, SECOND, start=FIRST, factory=factory)
    replacement = wait_for(
        lambda: pipeline.running_executors(EXECUTORS, without=victim.metadata.name),
        timeout=300,
        what="Spark to replace the killed executor with a new pod",
    )
    wait_for(
        lambda: state.last_batch(cassandra, keyspace, pipeline_id) > before,
        timeout=300,
        what=f"a batch committed after batch {before}, after the executor's kill",
    )
    status = pipeline.status()
    assert (status["epoch"], status["restarts"]) == (1, 0), "an executor's loss is no restart"

    ends = state.end_offsets(real_place.bootstrap, real_place.topic, PARTITIONS)
    assert sum(ends.values()) == FIRST + SECOND
    wait_for(
        lambda: state.committed(cassandra, keyspace, pipeline_id) == ends,
        timeout=400,
        what=f"the checkpoint at the topic's end offsets {ends}",
    )
    print(
        f"\n{image} built and loaded in {built:.0f}s; apply -> first commit "
        f"{first_commit:.1f}s with executors on {sorted(p.spec.node_name for p in executors)}; "
        f"executor killed -> replaced by {[p.metadata.name for p in replacement]}, "
        f"end offsets committed {time.monotonic() - killed:.1f}s after"
    )
    count = FIRST + SECOND
    assert clickscore.sink(cassandra, keyspace) == clickscore.expected_sink(
        factory, count, clickscore.weights()
    )
    letters = clickscore.letters(state.read_topic(real_place.bootstrap, dead_letters))
    assert letters == clickscore.expected_letters(factory, count)
    history = state.history(cassandra, keyspace, pipeline_id)
    assert {row.code_version for row in history} == {image}
    assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
