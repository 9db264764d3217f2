"""EndpointSlices for the node agent's pods: what a ServiceMonitor's discovery reads.

A ServiceMonitor selects Services, and Prometheus finds their pods through the
Services' EndpointSlices. On the node-agent stack the controller-manager runs without
its EndpointSlice controller: pod IPs are loopback addresses, which the API server
refuses in an IPv4 slice ("may not be in the loopback range"). It accepts them in a
slice of ``addressType: FQDN``, whose addresses it checks only as domain names, and
Prometheus's ``endpointslice`` discovery takes any slice's address as the target's
host whatever its type, so ``127.83.12.201:8080`` is scraped as it would be from an
IPv4 slice. This module builds those slices as the controller would (one endpoint per
running pod the Service selects, the Service's ports resolved against each pod's
container ports, the pod as ``targetRef`` so discovery adds its labels);
:mod:`sluice_dev.monitoring.slicesync` keeps them in the API while monitoring runs.

Pure: manifests in, manifests out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

MANAGED_BY_LABEL: Final = "endpointslice.kubernetes.io/managed-by"
MANAGER: Final = "sluice-dev.monitoring"
SERVICE_NAME_LABEL: Final = "kubernetes.io/service-name"
DIGEST_ANNOTATION: Final = "sluice.dev/endpoints-digest"

Port = tuple[str | None, int, str]
"""A slice port: (name, number, protocol)."""


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """A Service's selector matches a pod's labels (every key, equal value)."""
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _container_ports(pod: Mapping[str, Any]) -> dict[str, int]:
    named: dict[str, int] = {}
    for container in pod.get("spec", {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name"):
                named[port["name"]] = int(port["containerPort"])
    return named


def resolve_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> tuple[Port, ...]:
    """The Service's ports with ``targetPort`` resolved against ``pod``'s containers
    (a name the pod lacks leaves that port out, as the controller does)."""
    named = _container_ports(pod)
    resolved: list[Port] = []
    for port in service.get("spec", {}).get("ports") or []:
        target = port.get("targetPort", port["port"])
        number = named.get(target) if isinstance(target, str) else int(target)
        if number is not None:
            resolved.append((port.get("name"), number, port.get("protocol", "TCP")))
    return tuple(resolved)


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _serving(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status", {})
    deleting = pod.get("metadata", {}).get("deletionTimestamp") is not None
    return status.get("phase") == "Running" and bool(status.get("podIP")) and not deleting


def _endpoint(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    endpoint: dict[str, Any] = {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {"ready": _ready(pod), "serving": True, "terminating": False},
        "targetRef": {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
    }
    if node := pod.get("spec", {}).get("nodeName"):
        endpoint["nodeName"] = node
    return endpoint


def _slice_name(service: str, ports: Sequence[Port]) -> str:
    digest = hashlib.sha256(json.dumps(list(ports)).encode()).hexdigest()[:8]
    return f"{service[:50]}-fqdn-{digest}"


def slices_for(
    service: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The EndpointSlices of ``service``: one per distinct set of resolved ports among
    the running pods it selects in its namespace; none for a Service without a
    selector (its endpoints are someone else's to write)."""
    meta = service["metadata"]
    selector = service.get("spec", {}).get("selector") or {}
    groups: dict[tuple[Port, ...], list[dict[str, Any]]] = {}
    for pod in pods:
        pod_meta = pod["metadata"]
        if pod_meta.get("namespace") != meta["namespace"] or not _serving(pod):
            continue
        if not selects(selector, pod_meta.get("labels") or {}):
            continue
        ports = resolve_ports(service, pod)
        if ports:
            groups.setdefault(ports, []).append(_endpoint(pod))
    return [_slice(service, ports, endpoints) for ports, endpoints in sorted(groups.items())]


def _slice(
    service: Mapping[str, Any], ports: Sequence[Port], endpoints: list[dict[str, Any]]
) -> dict[str, Any]:
    meta = service["metadata"]
    body: dict[str, Any] = {
        "addressType": "FQDN",
        "endpoints": sorted(endpoints, key=lambda e: e["targetRef"]["name"]),
        "ports": [
            {**({"name": name} if name else {}), "port": number, "protocol": protocol}
            for name, number, protocol in ports
        ],
    }
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": _slice_name(meta["name"], ports),
            "namespace": meta["namespace"],
            "labels": {SERVICE_NAME_LABEL: meta["name"], MANAGED_BY_LABEL: MANAGER},
            "annotations": {DIGEST_ANNOTATION: _digest(body)},
            # Deleted with its Service. No blockOwnerDeletion: under the API server's
            # OwnerReferencesPermissionEnforcement that needs rights on the Service.
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        **body,
    }


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def desired(
    services: Iterable[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Every slice that should exist, by (namespace, name)."""
    wanted: dict[tuple[str, str], dict[str, Any]] = {}
    for service in services:
        for item in slices_for(service, pods):
            wanted[(item["metadata"]["namespace"], item["metadata"]["name"])] = item
    return wanted


def same(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether an existing slice already says what ``wanted`` says: compared by the
    digest each carries of its content, since the API server adds defaults to it."""

    def digest(item: Mapping[str, Any]) -> str | None:
        annotations = item.get("metadata", {}).get("annotations") or {}
        return annotations.get(DIGEST_ANNOTATION)

    return digest(existing) is not None and digest(existing) == digest(wanted)
