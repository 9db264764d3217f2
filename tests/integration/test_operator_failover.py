"""Node loss and operator restarts: the pipeline keeps exactly one acting driver.

The pipeline's driver runs on one of two private nodes of this test. Partitioning
that node (heartbeats stop, the process keeps running: a zombie) must bring up a
driver with a newer epoch on the other node within ``failover.nodeLostSeconds`` plus
the controller-manager's grace period, and remove the old pod object.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from sluice_dev import procs
from sluice_dev.nodeagent import control
from sluice_dev.paths import Layout
from sluice_dev.servers import kube
from tests.support.agents import ISOLATION_TAINT, PrivateAgent, private_agent
from tests.support.operator import STANDIN_IMAGE, STANDIN_ROOT, Operators, Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def pool(kube_stack: Layout, core: Any, tmp_path: Path) -> Iterator[tuple[str, list[PrivateAgent]]]:
    """Two private nodes labelled with a pool name only this test's pipeline selects."""
    name = f"pool-{uuid.uuid4().hex[:6]}"
    with ExitStack() as stack:
        agents = [
            stack.enter_context(
                private_agent(
                    kube_stack,
                    core,
                    tmp_path,
                    labels={"sluice.dev/pool": name},
                    images={STANDIN_IMAGE: STANDIN_ROOT},
                )
            )
            for _ in range(2)
        ]
        yield name, agents


def pooled_spec(pool_name: str, **standin: Any) -> dict[str, Any]:
    spec = standin_spec(**standin)
    spec["spark"]["driver"]["nodeSelector"] = {"sluice.dev/pool": pool_name}
    spec["spark"]["driver"]["tolerations"] = [{"key": ISOLATION_TAINT, "operator": "Exists"}]
    return spec


def test_partitioned_node_fails_over_to_the_other_node_and_removes_the_old_pod(
    kube_stack: Layout,
    operators: Operators,
    pipeline: Pipeline,
    pool: tuple[str, list[PrivateAgent]],
) -> None:
    pool_name, agents = pool
    operators.start()
    pipeline.create(pooled_spec(pool_name))
    pipeline.wait_phase("Running", epoch=1)
    (pod,) = pipeline.live_pods()
    lost = next(a for a in agents if a.node == pod.spec.node_name)
    survivor = next(a for a in agents if a is not lost)
    zombie_pid = int(pod.status.container_statuses[0].container_id.split("//")[1])

    partitioned = time.monotonic()
    control.partition(kube_stack, lost.node, port=lost.port)
    status = pipeline.wait_phase("Running", epoch=2, timeout=90)
    failover = time.monotonic() - partitioned

    (new,) = [p for p in pipeline.pods() if p.metadata.name == status["driverPod"]]
    assert new.spec.node_name == survivor.node
    assert all(p.metadata.name != pod.metadata.name for p in pipeline.pods())
    assert procs.pid_alive(zombie_pid), "the old driver runs on as a zombie (fenced by Cassandra)"
    fenced = next(c for c in status["conditions"] if c["type"] == "Fenced")
    assert fenced["reason"] == "NodeLost"
    grace = float(kube.NODE_MONITOR_GRACE.removesuffix("s"))
    print(
        f"\nfailover (partition -> new driver Running): {failover:.1f}s "
        f"(node grace {grace:.0f}s + nodeLostSeconds 5)"
    )
    assert failover >= 5

    control.heal(kube_stack, lost.node, port=lost.port)
    wait_for(
        lambda: not procs.pid_alive(zombie_pid),
        timeout=30,
        what="the healed node to kill the removed pod's process",
    )
    assert len(pipeline.live_pods()) == 1


def test_operator_killed_mid_upgrade_completes_it_after_restart(
    operators: Operators, pipeline: Pipeline
) -> None:
    first = operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    pipeline.patch_spec({"image": f"{STANDIN_IMAGE}:v2"})
    pipeline.wait_phase("Upgrading", timeout=30)
    first.stop(signal.SIGKILL)
    operators.start()
    status = pipeline.wait_phase("Running", epoch=2, timeout=90)
    assert status["image"] == f"{STANDIN_IMAGE}:v2"
    assert len(pipeline.live_pods()) == 1


def test_two_operator_replicas_keep_one_driver(operators: Operators, pipeline: Pipeline) -> None:
    replicas = [operators.start(leader_election=True) for _ in range(2)]
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1, timeout=90)
    for _ in range(10):  # a few reconcile rounds of both replicas
        assert len(pipeline.live_pods()) <= 1
        time.sleep(0.5)
    assert pipeline.status()["epoch"] == 1
    leader = next(r for r in replicas if _ready(r.http_port))
    leader.stop(signal.SIGKILL)
    pipeline.patch_spec({"image": f"{STANDIN_IMAGE}:v2"})
    status = pipeline.wait_phase("Running", epoch=2, timeout=120)
    assert status["image"] == f"{STANDIN_IMAGE}:v2"
    assert len(pipeline.live_pods()) == 1


def test_a_stopped_leader_hands_the_lease_to_the_standby_at_once(
    operators: Operators, pipeline: Pipeline
) -> None:
    replicas = [operators.start(leader_election=True) for _ in range(2)]
    leader = wait_for(
        lambda: next((r for r in replicas if _ready(r.http_port)), None),
        timeout=60,
        what="one replica to lead",
    )
    standby = next(r for r in replicas if r is not leader)
    assert not _ready(standby.http_port)
    leader.stop(signal.SIGTERM)
    assert leader.process.returncode == 0
    # Well within the Lease's 15 s duration: the leader released it on its way out.
    wait_for(lambda: _ready(standby.http_port), timeout=8, what="the standby to lead")
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1, timeout=60)


def _ready(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def test_driver_pod_is_admitted_under_the_restricted_pod_security_standard(
    operators: Operators, pipeline: Pipeline, core: Any
) -> None:
    core.patch_namespace(
        pipeline.namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    operators.start()
    pipeline.create(standin_spec())
    pipeline.wait_phase("Running", epoch=1)
    (pod,) = pipeline.live_pods()
    assert pod.spec.security_context.run_as_non_root
    # No executors: no token for the user's code (the API server adds none).
    assert pod.spec.automount_service_account_token is False
    assert not any(v.projected for v in pod.spec.volumes or [])
