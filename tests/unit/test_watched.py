"""The operator's loop: driver pods and nodes from the watches' indexes, a live read
only when they lag, and wake-ups that cut a loop's wait short."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from kubernetes import client

from sluice_operator import bells, naming, watched
from sluice_operator.model import NodeView, PodPhase
from sluice_operator.reconcile import reconcile
from sluice_operator.watched import Watched
from tests.support.fakekube import FakeApi
from tests.support.observations import SPEC

pytestmark = pytest.mark.unit

KEY = ("ns", "kpis")


def pod_body(epoch: int, phase: str = "Running", node: str = "n1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": naming.driver_pod("kpis", epoch),
            "namespace": "ns",
            "labels": {**naming.selector("kpis"), naming.LABEL_EPOCH: str(epoch)},
        },
        "spec": {"nodeName": node, "containers": [{"name": "driver"}]},
        "status": {"phase": phase, "podIP": "127.0.0.1"},
    }


def node_body(name: str, ready: str) -> dict[str, Any]:
    condition = {"type": "Ready", "status": ready, "lastTransitionTime": "2026-11-24T10:00:00Z"}
    return {"metadata": {"name": name}, "status": {"conditions": [condition]}}


def test_index_entries_are_the_views_decide_reads() -> None:
    entry = watched.pod_entry(pod_body(3, "Pending"))
    assert entry is not None
    ((key, view),) = entry.items()
    assert key == KEY
    assert (view.name, view.epoch, view.phase, view.node) == (
        "kpis-driver-3",
        3,
        PodPhase.PENDING,
        "n1",
    )
    assert watched.pod_entry({"metadata": {"name": "x", "namespace": "ns"}}) is None
    (node,) = watched.node_entry(node_body("n1", "False")).values()
    assert (node.name, node.ready) == ("n1", False)
    assert node.not_ready_since is not None


def test_a_snapshot_holds_the_pipelines_pods_and_their_nodes_only() -> None:
    mine = next(iter(watched.pod_entry(pod_body(3)).values()))  # type: ignore[union-attr]
    pods = {KEY: [mine], ("ns", "other"): [mine]}
    nodes = {"n1": [NodeView("n1", True)], "n2": [NodeView("n2", False)]}
    seen = watched.snapshot(pods, nodes, KEY)
    assert seen.pods == (mine,)
    assert dict(seen.nodes) == {"n1": NodeView("n1", True)}
    assert watched.pipelines_on(pods, "n1") == [KEY, ("ns", "other")]
    assert watched.pipelines_on(pods, "n2") == []


def test_a_snapshot_says_whether_any_node_of_the_cluster_is_ready() -> None:
    """Read from every node the watch holds, not only the pipeline's: with one node
    Ready elsewhere, a NotReady node is a node's problem; with none, the control
    plane's (``steps.node_lost``)."""
    mine = next(iter(watched.pod_entry(pod_body(3)).values()))  # type: ignore[union-attr]
    pods = {KEY: [mine]}
    some = {"n1": [NodeView("n1", False)], "n9": [NodeView("n9", True)]}
    assert watched.snapshot(pods, some, KEY).any_node_ready is True
    none = {"n1": [NodeView("n1", False)], "n9": [NodeView("n9", False)]}
    assert watched.snapshot(pods, none, KEY).any_node_ready is False
    assert watched.snapshot(pods, {}, KEY).any_node_ready is True  # no node seen yet


def started(api: FakeApi) -> None:
    api.pipelines[KEY] = {
        "metadata": {"name": "kpis", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": copy.deepcopy(SPEC),
    }
    reconcile(api.kube(), api.pipelines[KEY])  # epoch 1, its pod created
    for pod in api.pods.values():
        pod.status = client.V1PodStatus(phase="Running")


def test_a_reconcile_with_the_watches_reads_only_the_pipeline() -> None:
    api = FakeApi()
    started(api)
    pod = next(iter(api.pods.values()))
    seen = watched.pod_entry(pod.to_dict(serialize=True))
    assert seen is not None
    api.calls.clear()
    held = Watched(tuple(seen.values()), {"n1": NodeView("n1", True)})
    reconcile(api.kube(), api.pipelines[KEY], watched=held)
    reads = {m: n for m, n in api.calls.items() if not m.startswith(("patch", "create"))}
    assert reads == {"get_namespaced_custom_object": 1}


def test_a_watch_that_has_not_seen_the_new_driver_yet_falls_back_to_a_live_list() -> None:
    """Trusting an index that lags would start another epoch for a pod that exists."""
    api = FakeApi()
    started(api)
    epoch = api.pipelines[KEY]["status"]["epoch"]
    api.calls.clear()
    reconcile(api.kube(), api.pipelines[KEY], watched=Watched())
    assert api.calls["list_namespaced_pod"] == 1
    assert api.pipelines[KEY]["status"]["epoch"] == epoch
    assert len(api.pods) == 1


async def _pause_outcomes() -> tuple[bool, bool, float]:
    key = ("ns", "bell")
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, bells.ring, key)
    rung = await bells.pause(key, 30.0, asyncio.Event().wait())
    timed_out = await bells.pause(key, 0.05, asyncio.Event().wait())
    stop = asyncio.Event()
    loop.call_later(0.05, stop.set)
    started_at = loop.time()
    await bells.pause(key, 30.0, stop.wait())
    return rung, timed_out, loop.time() - started_at


def test_a_ring_or_a_stop_cuts_a_pause_short() -> None:
    rung, timed_out, stopped_after = asyncio.run(_pause_outcomes())
    assert rung is True
    assert timed_out is False
    assert stopped_after < 30.0


def test_a_standby_pod_is_seen_by_its_control_port() -> None:
    """What tells the operator that the current driver began as a standby, to which a
    lost promotion is sent again: the control port the operator gave its container."""
    standby = pod_body(5)
    standby["spec"]["containers"][0]["ports"] = [
        {"name": "metrics", "containerPort": 8090},
        {"name": "control", "containerPort": 8091},
    ]
    (view,) = watched.pod_entry(standby).values()  # type: ignore[union-attr]
    assert view.control
    (plain,) = watched.pod_entry(pod_body(4)).values()  # type: ignore[union-attr]
    assert not plain.control
