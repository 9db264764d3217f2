"""The product as a platform team installs it, on real nodes: ``helm install`` of the
chart with the operator image built from Dockerfile.operator. Its two replicas run in
containers under the kubelets (the chart's uid, read-only root, no capabilities, under
Pod Security ``restricted``), talk to the API server through the ``kubernetes``
Service, and one leads through the Lease. A pipeline of the job image then gets its
driver on a worker from that operator, and commits. The leader's container is killed:
a replica leads again (the restarted one, whose Lease identity is the same, or the
other once the Lease expires), and the driver runs on in its epoch (an operator's death is
not a driver's). The pipeline is deleted through the operator, and ``helm uninstall``
removes the operator's pods.

What the node agent could not show: the operator image's entrypoint, its pods on
addresses of their own (two replicas, one port each), its probes answered by a
kubelet, and its restart by one. ``tests/integration/test_helm.py`` checks the chart's
RBAC, upgrade and uninstall on the node agent.
Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev.oci import images as oci_images
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.realnode import images as node_images
from sluice_dev.realnode import plan
from tests.support import state
from tests.support.fixtures import REAL_JOB_IMAGE
from tests.support.helm import CHART, operator_pods
from tests.support.helm import runner as helm_runner
from tests.support.operator import Pipeline
from tests.support.real_images import RealPlace, kill_container
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(900)]

RELEASE = f"sl-{uuid.uuid4().hex[:6]}"
"""A release name of this run's own: cluster-scoped objects of a failed run's release
(its driver ClusterRole, its admission policies) do not stand in the way."""
PORT = 8080
"""The chart's default operator port: each replica has its pod's address to itself."""


def _readyz(pod: Any) -> int:
    try:
        with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{PORT}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def _leader(core: Any, namespace: str) -> Any | None:
    """The one Running replica answering /readyz 200 (the leader); None while there is
    none, or more than one."""
    running = [
        p
        for p in operator_pods(core, namespace, RELEASE)
        if p.status.phase == "Running" and p.status.pod_ip
    ]
    leading = [p for p in running if _readyz(p) == 200]
    return leading[0] if len(leading) == 1 else None


def _restarts(core: Any, pod: Any) -> int:
    found = core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
    return int(found.status.container_statuses[0].restart_count)


def test_the_chart_runs_the_operator_image_on_real_nodes_and_its_driver_commits(
    kube_stack: Layout,
    real_workers: tuple[plan.Worker, ...],
    real_sink: RealPlace,
    pipeline: Pipeline,
    core: Any,
    namespace: str,
    cassandra: Any,
    helm_binary: Path,
    sluice_crd: str,
    tmp_path: Path,
) -> None:
    operator_image = oci_images.OPERATOR.dev
    for worker in real_workers:
        node_images.load(kube_stack, worker, operator_image)
    helm = helm_runner(helm_binary, kube_stack, tmp_path)
    repository, tag = operator_image.rsplit(":", 1)
    started = time.monotonic()
    helm(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        namespace,
        f"--set=image.repository={repository}",
        f"--set=image.tag={tag}",
        "--set=image.pullPolicy=Never",  # loaded into the workers; no registry here
        "--set=operator.podPolicy.nodeLabels={sluice.dev/node}",
    )
    leader = wait_for(
        lambda: _leader(core, namespace),
        timeout=300,
        what="one operator replica leading (/readyz 200 on its pod's address)",
        ignoring=(OSError,),
    )
    installed = time.monotonic() - started
    replicas = operator_pods(core, namespace, RELEASE)
    assert len(replicas) == 2
    assert {p.spec.node_name for p in replicas} <= {w.name for w in real_workers}
    container = leader.spec.containers[0]
    assert container.image == operator_image
    assert container.security_context.read_only_root_filesystem is True

    keyspace = real_sink.keyspace
    produce(real_sink.bootstrap, real_sink.topic, 1_000)
    applied = time.monotonic()
    pipeline.create(real_sink.spec(REAL_JOB_IMAGE, "sluice_job.examples.events:transform", cap=500))
    pipeline_id = pipeline.checkpoint_key
    wait_for(
        lambda: state.last_batch(cassandra, keyspace, pipeline_id, 1) > 0,
        timeout=400,
        what="a batch committed by the driver the chart's operator started",
        ignoring=(InvalidRequest,),
    )
    first_commit = time.monotonic() - applied
    (driver,) = pipeline.live_pods()

    kill_container(real_workers, leader)
    killed = time.monotonic()
    wait_for(
        lambda: _restarts(core, leader) >= 1,
        timeout=120,
        what=f"the kubelet to restart {leader.metadata.name}'s killed container",
    )
    # The restarted container holds the Lease's identity (pod name and pid 1) and may
    # renew it at once; else the other replica takes it when it expires (15 s).
    successor = wait_for(
        lambda: _leader(core, namespace),
        timeout=120,
        what="a replica leading again",
        ignoring=(OSError,),
    )
    took_over = time.monotonic() - killed
    before = state.last_batch(cassandra, keyspace, pipeline_id, 1)
    produce(real_sink.bootstrap, real_sink.topic, 1_000, start=1_000)
    wait_for(
        lambda: state.last_batch(cassandra, keyspace, pipeline_id, 1) > before,
        timeout=300,
        what=f"the epoch-1 driver to commit after batch {before}",
    )
    assert [p.metadata.uid for p in pipeline.live_pods()] == [driver.metadata.uid]
    assert pipeline.status()["epoch"] == 1, "an operator's death restarts no driver"
    print(
        f"\nhelm install -> operator leading {installed:.1f}s; apply -> first commit "
        f"{first_commit:.1f}s; leader killed -> {successor.metadata.name} "
        f"({'restarted' if successor.metadata.uid == leader.metadata.uid else 'the other'}) "
        f"leads {took_over:.1f}s after"
    )

    pipeline.delete()
    wait_for(lambda: pipeline.get() is None, timeout=180, what="the pipeline deleted")
    helm("uninstall", RELEASE, "-n", namespace, "--wait", "--timeout=120s")
    wait_for(
        lambda: not operator_pods(core, namespace, RELEASE),
        timeout=120,
        what="the operator's pods gone",
    )
