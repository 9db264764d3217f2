"""What each real node is: its name, addresses, directories and configuration files.

Pure: the same stack directory gives the same plan, and the files rendered here are
what :mod:`sluice_dev.realnode.servers` writes before starting containerd and the
kubelet. The address plan (all inside namespaces of the stack's own):

- ``10.250.0.1/24``: the stack's bridge (:data:`sluice_dev.netns.ADDRESS`), where the
  servers listen;
- ``10.250.0.1N``: worker ``N``'s node address, on a veth whose other end is on the
  bridge (the kubelet's API, its InternalIP);
- ``10.251.N.0/24``: the pods of worker ``N``, on the worker's ``cni0`` bridge
  (gateway ``10.251.N.1``); the stack's namespace routes each worker's range to its
  node address, so pods of different workers and the stack's own processes (the
  operator, the tests) reach every pod.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sluice_dev import netns
from sluice_dev.paths import Layout

WORKERS: Final = (1, 2)
PAUSE_IMAGE: Final = "localhost/sluice/pause:3.10"
CNI_BIN: Final = Path("/usr/lib/cni")
"""Debian's containernetworking-plugins."""
KUBELET_PORT: Final = 10250
KUBE_PROXY_HEALTHZ: Final = 10256
POD_LOGS: Final = "pod-logs"


@dataclass(frozen=True)
class Worker:
    """One real node: a kubelet and a containerd in a network namespace of its own."""

    index: int
    stack_netns: str
    data: Path
    """Its state that survives a restart: containerd's images, the kubelet's pods."""
    run: Path
    """Sockets and runtime state (short paths: a socket path has 107 bytes at most)."""

    @property
    def name(self) -> str:
        """The Node's name in the API."""
        return f"sluice-worker-{self.index}"

    @property
    def netns(self) -> str:
        return f"{self.stack_netns}-w{self.index}"

    @property
    def address(self) -> str:
        return f"10.250.0.{10 + self.index}"

    @property
    def pod_cidr(self) -> str:
        return f"10.251.{self.index}.0/24"

    @property
    def pod_gateway(self) -> str:
        return f"10.251.{self.index}.1"

    @property
    def veth(self) -> str:
        """The veth's end on the stack's bridge (its other end is ``eth0``)."""
        return f"worker{self.index}"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's ``cgroupRoot``: its pods' cgroups live under it, apart from
        every other worker's and the machine's."""
        return f"/{self.netns}"

    @property
    def socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def conf(self) -> Path:
        return self.data / "conf"

    @property
    def kubelet_root(self) -> Path:
        return self.data / "kubelet"


def workers(layout: Layout) -> tuple[Worker, ...]:
    stack_netns = netns.name(layout)
    return tuple(
        Worker(
            index=index,
            stack_netns=stack_netns,
            data=layout.data(f"worker-{index}"),
            run=Path("/run") / f"{stack_netns}-w{index}",
        )
        for index in WORKERS
    )


def worker(layout: Layout, index: int) -> Worker:
    for item in workers(layout):
        if item.index == index:
            return item
    raise KeyError(f"no worker {index}; the stack has {list(WORKERS)}")


def containerd_config(node: Worker, runc: str) -> str:
    """containerd 1.6's configuration (version 2 of its format) for ``node``.

    ``restrict_oom_score_adj``: the kubelet asks for negative OOM scores (-998 for a
    pod's sandbox), which need CAP_SYS_RESOURCE; without that capability runc failed
    to start every sandbox ("can't get final child's PID from pipe"). Restricted, the
    score is kept no lower than containerd's own.
    """
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    disabled = [
        "io.containerd.snapshotter.v1.aufs",
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.tracing.processor.v1.otlp",
    ]
    return "\n".join(
        [
            "version = 2",
            f"root = {json.dumps(str(node.data / 'containerd'))}",
            f"state = {json.dumps(str(node.run / 'containerd'))}",
            f"disabled_plugins = {json.dumps(disabled)}",
            "[grpc]",
            f"  address = {json.dumps(str(node.socket))}",
            "[ttrpc]",
            f"  address = {json.dumps(str(node.socket) + '.ttrpc')}",
            "[debug]",
            '  address = ""',
            "[metrics]",
            '  address = ""',
            f"[{cri}]",
            f"  sandbox_image = {json.dumps(PAUSE_IMAGE)}",
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            "  restrict_oom_score_adj = true",
            "  enable_selinux = false",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            f"  BinaryName = {json.dumps(runc)}",
            "  SystemdCgroup = false",
            f"[{cri}.cni]",
            f"  bin_dir = {json.dumps(str(CNI_BIN))}",
            f"  conf_dir = {json.dumps(str(node.conf / 'cni'))}",
            "",
        ]
    )


def cni_config(node: Worker) -> str:
    """The pods' network: a bridge in the worker's namespace, addresses from its range,
    no masquerade (pods are reached by their own address)."""
    return json.dumps(
        {
            "cniVersion": "0.4.0",
            "name": "sluice",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": node.pod_cidr, "gateway": node.pod_gateway}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(node.data / "cni-ipam"),
                    },
                }
            ],
        },
        indent=2,
    )


def kubelet_config(node: Worker, client_ca: Path, cluster_dns: str, cluster_domain: str) -> str:
    """The kubelet's KubeletConfiguration (JSON is YAML).

    Its API (logs, exec) takes client certificates of the stack's CA and asks the API
    server who may do what; no read-only port. Eviction thresholds are set low: the
    stack shares the machine's disk, whose fill level is not the node's doing.
    Pods resolve names through ``cluster_dns`` (the stack's CoreDNS, for
    ``cluster_domain``); ``resolvConf`` is empty: the node has no resolver of its own
    to pass on (nothing outside is reachable). ``localStorageCapacityIsolation``
    stays on (the default): off, the kubelet's cAdvisor collects no filesystem usage
    with a CRI runtime, the node reports no ``ephemeral-storage``, and no driver pod
    (its scratch emptyDir asks for some) could be scheduled on it.
    """
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.address,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        "cgroupsPerQOS": True,
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "failSwapOn": False,
        "podCIDR": node.pod_cidr,
        "podLogsDir": str(node.data / POD_LOGS),
        "resolvConf": "",
        "clusterDNS": [cluster_dns],
        "clusterDomain": cluster_domain,
        "serializeImagePulls": False,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "2s",
        "nodeLeaseDurationSeconds": 10,
        "makeIPTablesUtilChains": False,
        "enforceNodeAllocatable": [],
    }
    return json.dumps(config, indent=2)


CLUSTER_CIDR: Final = "10.251.0.0/16"
"""Every worker's pod range: kube-proxy masquerades what comes from outside it."""


def kube_proxy_config(node: Worker, kubeconfig: Path) -> str:
    """kube-proxy's KubeProxyConfiguration: iptables rules in the worker's namespace
    that take a pod's connection to a Service's ClusterIP (the ``kubernetes`` Service
    at 10.0.0.1:443 above all) to one of its endpoints. It leaves the conntrack
    sysctls alone (``maxPerCore: 0``, timeouts 0): they are the machine's, not the
    namespace's, and the stack has no business changing them."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": CLUSTER_CIDR,
        "hostnameOverride": node.name,
        "bindAddress": node.address,
        "healthzBindAddress": f"{node.address}:{KUBE_PROXY_HEALTHZ}",
        "metricsBindAddress": f"{node.address}:10249",
        "nodePortAddresses": [f"{node.address}/32"],
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return json.dumps(config, indent=2)


def kubelet_argv(node: Worker, binary: Path, config: Path, kubeconfig: Path) -> list[str]:
    return [
        str(binary),
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={node.kubelet_root}",
        f"--cert-dir={node.kubelet_root / 'pki'}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.address}",
        "--node-labels=sluice.dev/node=real",
        "--v=1",
    ]
