"""What the operator's watches hold about one pipeline: its driver pods and their
nodes, read from kopf's in-memory indexes instead of the API server.

The indexes are fed by watches (one stream for all driver pods, one for nodes), so
a reconcile costs no list of pods and no read of a node. A watch can lag behind the
API by a moment; ``reconcile.observe`` falls back to a live read when the status
names a driver pod the snapshot does not hold yet (the one it just created).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from sluice_operator import naming
from sluice_operator.kube import node_view, pod_view
from sluice_operator.model import NodeView, PodView

PipelineKey = tuple[str, str]
"""(namespace, name) of a pipeline: the key of the driver-pod index."""


@dataclass(frozen=True)
class Watched:
    pods: tuple[PodView, ...] = ()
    nodes: Mapping[str, NodeView] = field(default_factory=dict)
    any_node_ready: bool = True
    """Whether any node the watch holds is Ready (``True`` while it holds none)."""


def pod_entry(body: Mapping[str, Any]) -> dict[PipelineKey, PodView] | None:
    """The driver-pod index's entry for one pod: keyed by its pipeline."""
    meta = body.get("metadata") or {}
    pipeline = (meta.get("labels") or {}).get(naming.LABEL_PIPELINE)
    if not pipeline:
        return None
    pod = client.V1Pod.model_validate(dict(body))
    return {(meta.get("namespace", ""), pipeline): pod_view(pod)}


def node_entry(body: Mapping[str, Any]) -> dict[str, NodeView]:
    """The node index's entry for one node: its readiness."""
    view = node_view(client.V1Node.model_validate(dict(body)))
    return {view.name: view}


def snapshot(
    pods: Mapping[PipelineKey, Iterable[PodView]],
    nodes: Mapping[str, Iterable[NodeView]],
    key: PipelineKey,
) -> Watched:
    """The pipeline's pods and their nodes, copied out of the indexes, and whether any
    node of the cluster is Ready. Called on the event loop, where kopf updates the
    indexes, so the copy is consistent."""
    held = tuple(pods.get(key, ()))
    found: dict[str, NodeView] = {}
    for pod in held:
        if pod.node and pod.node in nodes:
            found.update((view.name, view) for view in nodes[pod.node])
    views = [view for entries in nodes.values() for view in entries]
    any_ready = not views or any(view.ready for view in views)
    return Watched(held, found, any_ready)


def pipelines_on(pods: Mapping[PipelineKey, Iterable[PodView]], node: str) -> list[PipelineKey]:
    """The pipelines with a driver pod on ``node``: woken when its readiness changes."""
    return [key for key, views in pods.items() if any(p.node == node for p in views)]
