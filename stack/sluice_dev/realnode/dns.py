"""The cluster's DNS for the pods of real nodes: CoreDNS of a pinned release, built
from the Go module proxy with the plugins a cluster DNS uses (``stack/go/coredns``),
answering ``cluster.local`` from the API server as kube-dns does on a real cluster.

A pod's ``dnsPolicy: ClusterFirst`` (the default, and the operator's) needs the
kubelet's ``clusterDNS``; without one every pod start logs a ``MissingClusterDNS``
Warning and the pod falls back to the node's resolver (none here). CoreDNS runs as a
server of the stack in its network namespace, on the stack's address, port 53, which
pods reach as they reach Kafka; a real cluster puts it behind the ``kube-dns``
Service. It has no ``forward`` plugin: nothing outside the cluster is reachable, so a
name outside ``cluster.local`` fails at once instead of timing out.

Its identity is the stack's node identity (the workers' kubeconfig), given read
access to what the kubernetes plugin watches (``sluice:cluster-dns``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sluice_dev import netns, ports, versions
from sluice_dev.build import STACK_SRC, GoBuild, go_artifact
from sluice_dev.paths import Layout
from sluice_dev.realnode import runtime
from sluice_dev.servers import kube
from sluice_dev.servers.base import Server

NAME: Final = "cluster-dns"
BUILD = GoBuild(STACK_SRC / "go" / "coredns", (".",))
ARTIFACT = go_artifact("coredns", versions.COREDNS, BUILD, on_demand=True)
DOMAIN: Final = "cluster.local"
ROLE: Final = "sluice:cluster-dns"
_WATCH: Final = ["list", "watch"]

CLUSTER_ROLE: Final = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": ROLE, "labels": {"app.kubernetes.io/managed-by": "sluice-dev"}},
    "rules": [
        {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": _WATCH},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": _WATCH},
    ],
}
"""What CoreDNS's kubernetes plugin reads (the rules of kube-dns's ``system:coredns``)."""


def address() -> str:
    """Where pods send their queries (the kubelet's ``clusterDNS``)."""
    return netns.ADDRESS


def corefile(kubeconfig: str) -> str:
    """CoreDNS's configuration: the cluster's zone and its reverse zones, served from
    the API server through ``kubeconfig``; health and readiness on loopback."""
    return f"""\
.:53 {{
    bind {address()}
    errors
    health 127.0.0.1:{ports.CLUSTER_DNS_HEALTH}
    ready 127.0.0.1:{ports.CLUSTER_DNS_READY}
    kubernetes {DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} {kube.CLUSTER_NAME}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
}}
"""


def _corefile_path(layout: Layout) -> Path:
    return layout.conf(NAME) / "Corefile"


def _prepare(layout: Layout) -> None:
    if not netns.ENABLED:
        raise runtime.NodeError("the cluster DNS serves real nodes: set SLUICE_NETNS=1")
    for collection, body in (
        (f"{kube.RBAC}/clusterroles", CLUSTER_ROLE),
        (f"{kube.RBAC}/clusterrolebindings", binding()),
    ):
        status, answer = kube.ensure_created(layout, collection, body)
        if status != 200:
            name = body["metadata"]["name"]  # type: ignore[index]
            raise runtime.NodeError(f"{collection}/{name}: {status} {answer[-300:]!r}")
    text = corefile(str(kube.node_agent_kubeconfig(layout)))
    kube.write_if_changed(_corefile_path(layout), text)


def binding() -> dict[str, object]:
    return kube.group_binding(ROLE, ROLE, kube.NODE_AGENT_GROUP)


def _argv(layout: Layout) -> Sequence[str]:
    binary = ARTIFACT.path(layout) / "bin" / "coredns"
    return [str(binary), "-conf", str(_corefile_path(layout))]


def _probe(_layout: Layout) -> str | None:
    """Ready once the kubernetes plugin has synced with the API server."""
    return runtime.healthz(f"http://127.0.0.1:{ports.CLUSTER_DNS_READY}/ready")


SERVERS: Final = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        requires=(kube.APISERVER,),
        artifacts=(ARTIFACT.name,),
        prepare=_prepare,
        start_timeout=60.0,
        stop_grace=5.0,
        optional=True,
    ),
)
