"""Real nodes as servers of the local stack: ``containerd-N`` and ``kubelet-N`` for
each worker ``N`` (``sluice-worker-N`` in the API), both optional.

``kube-proxy-N`` routes Services' ClusterIPs in the worker's namespace; the kubelets
need ``cluster-dns`` (:mod:`sluice_dev.realnode.dns`), the pods' resolver.
``sluice-dev up kube-proxy-1 kube-proxy-2`` (with ``SLUICE_NETNS=1``, after ``make
provision`` and ``make images``) starts two workers: each a containerd and a kubelet
of the pinned Kubernetes in the worker's own network namespace, running pods in
containers with runc. The kubelet authenticates as the stack's node identity (the
node agent's: the ``system:node`` ClusterRole). Stopping a kubelet leaves its pods
running, as on a real machine whose kubelet died; ``down`` kills them and removes
the worker (:func:`sluice_dev.realnode.runtime.tear_down`).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence

from sluice_dev import netns
from sluice_dev.paths import Layout
from sluice_dev.realnode import binaries, dns, plan, runtime
from sluice_dev.realnode.plan import Worker
from sluice_dev.servers import kube
from sluice_dev.servers.base import Server


def containerd_name(index: int) -> str:
    return f"containerd-{index}"


def kubelet_name(index: int) -> str:
    return f"kubelet-{index}"


def kube_proxy_name(index: int) -> str:
    return f"kube-proxy-{index}"


PROXIER_BINDING = "sluice:node-proxier"


def proxier_binding() -> dict[str, object]:
    """kube-proxy's rights (the built-in ``system:node-proxier``: Services and
    EndpointSlices, read) for the stack's node identity, which the workers use."""
    return kube.group_binding(PROXIER_BINDING, "system:node-proxier", kube.NODE_AGENT_GROUP)


def _require_netns() -> None:
    if not netns.ENABLED:
        raise runtime.NodeError(
            "real nodes run in the stack's network namespace: set SLUICE_NETNS=1"
        )


def _runc() -> str:
    found = shutil.which("runc")
    if not found:
        raise runtime.NodeError("runc not found: run `make images` (it installs it)")
    return found


def _containerd_prepare(index: int, layout: Layout) -> None:
    _require_netns()
    node = plan.worker(layout, index)
    netns.ensure(layout)
    runtime.plumb(node)
    runtime.make_cgroups(node)
    node.run.mkdir(parents=True, exist_ok=True)
    kube.write_if_changed(node.conf / "containerd.toml", plan.containerd_config(node, _runc()))
    kube.write_if_changed(node.conf / "cni" / "10-sluice.conflist", plan.cni_config(node))


def _containerd_argv(index: int, layout: Layout) -> Sequence[str]:
    node = plan.worker(layout, index)
    return netns.argv_in(node.netns, ["containerd", "--config", str(node.conf / "containerd.toml")])


def _containerd_probe(index: int, layout: Layout) -> str | None:
    node = plan.worker(layout, index)
    return None if runtime.answers(node.socket) else f"containerd not serving {node.socket}"


def _kubelet_prepare(index: int, layout: Layout) -> None:
    _require_netns()
    node = plan.worker(layout, index)
    runtime.load(node, plan.PAUSE_IMAGE, binaries.pause_archive(layout))
    config = plan.kubelet_config(node, kube.ca_cert(layout), dns.address(), dns.DOMAIN)
    kube.write_if_changed(node.conf / "kubelet.json", config)


def _kubelet_argv(index: int, layout: Layout) -> Sequence[str]:
    node = plan.worker(layout, index)
    argv = plan.kubelet_argv(
        node,
        binaries.kubelet(layout),
        node.conf / "kubelet.json",
        kube.node_agent_kubeconfig(layout),
    )
    return netns.argv_in(node.netns, argv)


def _kube_proxy_prepare(index: int, layout: Layout) -> None:
    _require_netns()
    node = plan.worker(layout, index)
    status, body = kube.ensure_binding(layout, proxier_binding())
    if status != 200:
        raise runtime.NodeError(f"clusterrolebinding {PROXIER_BINDING}: {status} {body[-300:]!r}")
    config = plan.kube_proxy_config(node, kube.node_agent_kubeconfig(layout))
    kube.write_if_changed(node.conf / "kube-proxy.json", config)


def _kube_proxy_argv(index: int, layout: Layout) -> Sequence[str]:
    node = plan.worker(layout, index)
    argv = [str(binaries.kube_proxy(layout)), f"--config={node.conf / 'kube-proxy.json'}"]
    return netns.argv_in(node.netns, [*argv, "--v=1"])


def _kube_proxy_probe(index: int, layout: Layout) -> str | None:
    """Healthy once its /healthz, on the node's address, says it synced its rules."""
    node = plan.worker(layout, index)
    return runtime.healthz(f"http://{node.address}:{plan.KUBE_PROXY_HEALTHZ}/healthz")


def _worker_servers(index: int) -> tuple[Server, Server, Server]:
    def node(layout: Layout) -> Worker:
        return plan.worker(layout, index)

    containerd = Server(
        name=containerd_name(index),
        argv=lambda layout: _containerd_argv(index, layout),
        probe=lambda layout: _containerd_probe(index, layout),
        prepare=lambda layout: _containerd_prepare(index, layout),
        cleanup=lambda layout: runtime.tear_down(node(layout)),
        start_timeout=60.0,
        stop_grace=10.0,
        optional=True,
    )
    kubelet = Server(
        name=kubelet_name(index),
        argv=lambda layout: _kubelet_argv(index, layout),
        probe=lambda layout: kube.node_problem(layout, node(layout).name),
        requires=(containerd.name, kube.APISERVER, dns.NAME),
        artifacts=(binaries.ARTIFACT.name, binaries.PAUSE.name),
        prepare=lambda layout: _kubelet_prepare(index, layout),
        start_timeout=90.0,
        stop_grace=15.0,
        optional=True,
    )
    kube_proxy = Server(
        name=kube_proxy_name(index),
        argv=lambda layout: _kube_proxy_argv(index, layout),
        probe=lambda layout: _kube_proxy_probe(index, layout),
        requires=(kubelet.name,),
        artifacts=(binaries.ARTIFACT.name,),
        prepare=lambda layout: _kube_proxy_prepare(index, layout),
        start_timeout=60.0,
        stop_grace=10.0,
        optional=True,
    )
    return containerd, kubelet, kube_proxy


SERVERS: tuple[Server, ...] = (
    *dns.SERVERS,
    *(server for index in plan.WORKERS for server in _worker_servers(index)),
)
ARTIFACTS = (*binaries.ARTIFACTS, dns.ARTIFACT)
