"""A Node object and its heartbeats, kept the way a kubelet keeps them.

Registration creates (or adopts) the Node with capacity, labels and optional taints,
so the real kube-scheduler places pods on it. Every heartbeat patches the node status
(conditions with a fresh ``lastHeartbeatTime``, capacity, addresses) and renews the
node's Lease in ``kube-node-lease``: the node lifecycle controller watches both, and
once neither moves for ``--node-monitor-grace-period`` it marks the node's Ready
condition ``Unknown`` and taints it unreachable.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubernetes.client import CoordinationV1Api, CoreV1Api, V1Lease, V1Node
from kubernetes.client.exceptions import ApiException

from sluice_dev import versions
from sluice_dev.nodeagent.clock import micro, now, rfc3339
from sluice_dev.nodeagent.podnet import HOST_IP

LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
# Advertised, not enforced (the agent runs processes, not cgroups): enough CPU for
# `make bench-operator`'s 100 one-core driver pods (2Gi scratch each) on the stack's
# two nodes.
CAPACITY: Mapping[str, str] = {
    "cpu": "64",
    "memory": "64Gi",
    "pods": "110",
    "ephemeral-storage": "1Ti",
}
TIMEOUT = 10.0


def labels(name: str, extra: Mapping[str, str] = {}) -> dict[str, str]:
    return {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": _arch(),
        "node.kubernetes.io/instance-type": "sluice-node-agent",
        **extra,
    }


def taint(text: str) -> dict[str, str]:
    """``key=value:Effect`` (or ``key:Effect``) -> a taint."""
    spec, sep, effect = text.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise ValueError(f"expected key[=value]:NoSchedule|PreferNoSchedule|NoExecute: {text!r}")
    key, _, value = spec.partition("=")
    return {"key": key, "value": value, "effect": effect}


def node_body(
    name: str, taints: Sequence[Mapping[str, str]], extra: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels(name, extra)},
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
    }


def status_patch(name: str, ready_since: datetime, moment: datetime) -> dict[str, Any]:
    """The node ``status`` as a kubelet posts it: healthy, with a fresh heartbeat."""

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": rfc3339(moment),
            "lastTransitionTime": rfc3339(ready_since),
        }

    return {
        "status": {
            "capacity": dict(CAPACITY),
            "allocatable": dict(CAPACITY),
            "addresses": [
                {"type": "InternalIP", "address": HOST_IP},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [
                condition("Ready", "True", "KubeletReady", "node agent is posting ready status"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", ""),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", ""),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", ""),
            ],
            "nodeInfo": _node_info(name),
        }
    }


def register(
    core: CoreV1Api, name: str, taints: Sequence[Mapping[str, str]], extra: Mapping[str, str]
) -> str:
    """Create the Node, or adopt an existing one (labels and taints merged in); its uid."""
    body = node_body(name, taints, extra)
    try:
        node = core.create_node(V1Node.model_validate(body), _request_timeout=TIMEOUT)
    except ApiException as err:
        if err.status != 409:
            raise
        patch = {"metadata": {"labels": body["metadata"]["labels"]}, "spec": body["spec"]}
        node = core.patch_node(name, patch, _content_type=STRATEGIC, _request_timeout=TIMEOUT)
    uid = node.metadata.uid if node.metadata else None
    if not uid:
        raise RuntimeError(f"the API returned node {name} without a uid")
    return uid


def heartbeat(
    core: CoreV1Api, coord: CoordinationV1Api, name: str, uid: str, ready_since: datetime
) -> None:
    """Post the node status and renew its Lease (creating the Lease if missing)."""
    moment = now()
    core.patch_node_status(
        name,
        status_patch(name, ready_since, moment),
        _content_type=STRATEGIC,
        _request_timeout=TIMEOUT,
    )
    renew = {"spec": {"holderIdentity": name, "renewTime": micro(moment)}}
    try:
        coord.patch_namespaced_lease(
            name, LEASE_NAMESPACE, renew, _content_type=MERGE, _request_timeout=TIMEOUT
        )
    except ApiException as err:
        if err.status != 404:
            raise
        coord.create_namespaced_lease(
            LEASE_NAMESPACE, V1Lease.model_validate(lease_body(name, uid)), _request_timeout=TIMEOUT
        )
        coord.patch_namespaced_lease(
            name, LEASE_NAMESPACE, renew, _content_type=MERGE, _request_timeout=TIMEOUT
        )


def lease_body(name: str, node_uid: str) -> dict[str, Any]:
    """The node Lease, owned by its Node so that deleting the Node removes it."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": LEASE_NAMESPACE,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}
            ],
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS},
    }


def _node_info(name: str) -> dict[str, str]:
    return {
        "machineID": name,
        "systemUUID": name,
        "bootID": f"{name}-{os.getpid()}",
        "kernelVersion": platform.release(),
        "osImage": "Sluice node agent",
        "containerRuntimeVersion": "sluice://1",
        "kubeletVersion": f"v{versions.KUBERNETES}",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": _arch(),
    }


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
