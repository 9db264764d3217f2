"""A hostile tenant on real nodes: the credentials a real kubelet puts in a driver's
container, used exactly as the tenant's code in it would use them.

The tenant chooses the driver's image, so the code in a driver pod is theirs. A driver
with executors gets the token the kubelet projects (``/var/run/secrets/kubernetes.io/
serviceaccount``, here read where the kubelet wrote it for that container): with it
the driver creates and deletes its own executor pods, and RBAC and the chart's
admission policy refuse the rest (Secrets, another namespace, a pod that is no
executor). The token is bound to the driver's pod: once the pipeline is deleted and
the pod gone, a copy of it is refused (401; within the 10 s the API server caches a
successful authentication). A driver without executors gets no token
at all: the kubelet projects nothing for it. ``tests/integration/test_hostile_tenant.py``
goes through every refusal with the node agent's credentials; this test is what only
a kubelet can show, that the credentials it mounts are these.
Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from sluice_dev.paths import Layout
from sluice_dev.realnode import plan
from tests.support.fixtures import REAL_JOB_IMAGE
from tests.support.operator import Pipeline
from tests.support.real_images import RealPlace, worker_of
from tests.support.tenant import (
    executor_pod,
    executor_selector,
    forbidden_by_policy,
    forbidden_by_rbac,
    kubelet_token,
    kubelet_volumes,
    refusal,
    with_token,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(900)]

ENTRYPOINT = "sluice_job.examples.events:transform"
NOWHERE = {"sluice.dev/node": "nowhere"}
"""Executors' node selector: Spark's executor pods exist in the API, never on a node."""


def _running_driver(pipeline: Pipeline) -> Any:
    def running() -> Any:
        pods = [p for p in pipeline.live_pods() if p.status.phase == "Running"]
        return pods[0] if pods else None

    return wait_for(running, timeout=400, what=f"{pipeline.name}'s driver running")


def test_a_kubelet_gives_a_driver_a_token_for_its_own_executors_only_bound_to_its_pod(
    kube_stack: Layout,
    real_workers: tuple[plan.Worker, ...],
    real_place: RealPlace,
    pipeline: Pipeline,
    core: Any,
    namespace: str,
    driver_cluster_role: str,
) -> None:
    with_executors = real_place.spec(REAL_JOB_IMAGE, ENTRYPOINT, cap=100)
    with_executors["spark"]["executors"] = {"instances": 1, "nodeSelector": NOWHERE}
    without = Pipeline(pipeline.custom, pipeline.core, pipeline.namespace, "no-executors")
    pipeline.create(with_executors)
    without.create(real_place.spec(REAL_JOB_IMAGE, ENTRYPOINT, cap=100))
    driver, plain_driver = _running_driver(pipeline), _running_driver(without)

    worker = worker_of(real_workers, driver)
    token = wait_for(
        lambda: kubelet_token(worker, driver),
        timeout=60,
        what=f"the token {worker.name}'s kubelet projected for {driver.metadata.name}",
    )
    as_driver = with_token(kube_stack, token)

    # Its own executor pods, as Spark creates and deletes them: allowed.
    mine = executor_pod(driver, 99)
    as_driver.create_namespaced_pod(namespace, mine)
    name = mine["metadata"]["name"]
    assert name in {p.metadata.name for p in pipeline.executor_pods()}
    as_driver.delete_namespaced_pod(name, namespace)
    # Anything else: RBAC, then the chart's admission policy, say no.
    assert forbidden_by_rbac(refusal(as_driver.list_namespaced_secret, namespace))
    assert forbidden_by_rbac(refusal(as_driver.list_namespaced_pod, "kube-system"))
    # A pod Pod Security's `restricted` admits, refused only for not being an executor.
    confined = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    miner = {
        "metadata": {"name": "miner"},
        "spec": {"containers": [{"name": "m", "image": "m", "securityContext": confined}]},
    }
    assert forbidden_by_policy(refusal(as_driver.create_namespaced_pod, namespace, miner))
    assert forbidden_by_policy(
        refusal(as_driver.delete_namespaced_pod, plain_driver.metadata.name, namespace)
    )

    # No executors, no token: the kubelet projected nothing for that driver.
    assert plain_driver.spec.automount_service_account_token is False
    plain_worker = worker_of(real_workers, plain_driver)
    assert kubelet_volumes(plain_worker, plain_driver).is_dir(), "the kubelet's pod directory"
    assert kubelet_token(plain_worker, plain_driver) is None

    # The token dies with its pod: deleted pipeline, deleted pod, a copy refused.
    pipeline.delete()
    wait_for(
        lambda: not pipeline.pods() and not pipeline.executor_pods(),
        timeout=180,
        what=f"{pipeline.name}'s driver and executor pods gone",
    )
    gone_at = time.monotonic()

    def unauthenticated() -> bool:
        found = refusal(
            as_driver.list_namespaced_pod,
            namespace,
            label_selector=executor_selector(pipeline.name),
        )
        return found is not None and found.status == 401

    # The API server caches a successful token authentication for 10 s (its
    # TokenSuccessCacheTTL, built in, no flag): the copy works at most that long after.
    wait_for(unauthenticated, timeout=60, what="the dead pod's token to be refused (401)")
    print(f"\npod gone -> its token refused (401) {time.monotonic() - gone_at:.1f}s after")
    without.delete()
    wait_for(lambda: without.get() is None, timeout=180, what=f"{without.name} deleted")
