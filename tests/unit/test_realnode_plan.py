"""The real nodes' plan: addresses that never overlap, configurations containerd and
the kubelet read, and the pause image archive containerd imports."""

from __future__ import annotations

import gzip
import hashlib
import io
import ipaddress
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from sluice_dev import netns, registry
from sluice_dev.paths import Layout
from sluice_dev.realnode import binaries, dns, plan, runtime
from sluice_dev.realnode import servers as realnode_servers
from sluice_dev.servers import kube

pytestmark = pytest.mark.unit


def _layout(tmp_path: Path, name: str = "stack") -> Layout:
    return Layout(cache=tmp_path / "cache", stack=tmp_path / name)


def test_workers_have_distinct_names_addresses_ranges_and_namespaces(tmp_path: Path) -> None:
    workers = plan.workers(_layout(tmp_path))
    assert len(workers) >= 2
    for field in ("name", "address", "pod_cidr", "netns", "veth", "cgroup_root", "socket"):
        values = [getattr(w, field) for w in workers]
        assert len(set(values)) == len(values), field
    bridge = ipaddress.ip_network(f"{netns.ADDRESS}/{netns.PREFIX}", strict=False)
    ranges = [ipaddress.ip_network(w.pod_cidr) for w in workers]
    for worker, pods in zip(workers, ranges, strict=True):
        assert ipaddress.ip_address(worker.address) in bridge
        assert worker.address != netns.ADDRESS
        assert not pods.overlaps(bridge)
        assert ipaddress.ip_address(worker.pod_gateway) in pods
        assert len(str(worker.socket)) < 100, "a unix socket path has 107 bytes at most"
    assert not ranges[0].overlaps(ranges[1])


def test_two_stack_directories_get_different_namespaces(tmp_path: Path) -> None:
    one, two = _layout(tmp_path, "one"), _layout(tmp_path, "two")
    assert netns.name(one) != netns.name(two)
    assert plan.worker(one, 1).netns != plan.worker(two, 1).netns


def test_containerd_config_points_at_the_workers_own_state_and_cni(tmp_path: Path) -> None:
    node = plan.worker(_layout(tmp_path), 2)
    config = tomllib.loads(plan.containerd_config(node, "/usr/sbin/runc"))
    assert config["version"] == 2
    assert config["grpc"]["address"] == str(node.socket)
    assert config["root"].startswith(str(node.data))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == plan.PAUSE_IMAGE
    assert cri["restrict_oom_score_adj"] is True
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {"BinaryName": "/usr/sbin/runc", "SystemdCgroup": False}
    assert cri["cni"]["conf_dir"] == str(node.conf / "cni")


def test_cni_and_kubelet_configs_use_the_workers_range_and_address(tmp_path: Path) -> None:
    node = plan.worker(_layout(tmp_path), 1)
    cni = json.loads(plan.cni_config(node))
    ranges = cni["plugins"][0]["ipam"]["ranges"]
    assert ranges == [[{"subnet": node.pod_cidr, "gateway": node.pod_gateway}]]
    assert cni["plugins"][0]["ipMasq"] is False
    kubelet = json.loads(plan.kubelet_config(node, Path("/ca.crt"), "10.250.0.1", "cluster.local"))
    assert kubelet["clusterDNS"] == ["10.250.0.1"]
    assert kubelet["clusterDomain"] == "cluster.local"
    assert kubelet["address"] == node.address
    assert kubelet["cgroupRoot"] == node.cgroup_root
    assert kubelet["containerRuntimeEndpoint"] == f"unix://{node.socket}"
    assert kubelet["authentication"]["anonymous"] == {"enabled": False}
    assert kubelet["authorization"] == {"mode": "Webhook"}
    assert kubelet["readOnlyPort"] == 0
    argv = plan.kubelet_argv(node, Path("/k"), Path("/c"), Path("/kc"))
    assert f"--node-ip={node.address}" in argv
    assert f"--hostname-override={node.name}" in argv


def test_the_pause_archive_is_an_oci_layout_whose_digests_hold(tmp_path: Path) -> None:
    payload = b"\x7fELF pretend pause"
    archive = binaries.oci_archive(payload)
    assert archive == binaries.oci_archive(payload), "reproducible"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}

    def blob(digest: str) -> bytes:
        data = files[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
        return data

    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == plan.PAUSE_IMAGE
    # The name and digest a worker's load compares with what its containerd holds
    # (the OCI reference name is the tag alone here: containerd's annotation wins).
    (tmp_path / "pause.tar").write_bytes(archive)
    assert runtime.archived(tmp_path / "pause.tar") == (plan.PAUSE_IMAGE, entry["digest"])
    manifest = json.loads(blob(entry["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))
    assert config["config"] == {"User": "65535:65535", "Entrypoint": ["/pause"]}
    (layer_entry,) = manifest["layers"]
    layer = gzip.decompress(blob(layer_entry["digest"]))
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        (member,) = tar.getmembers()
        assert (member.name, member.mode) == ("pause", 0o755)
        assert tar.extractfile(member).read() == payload  # type: ignore[union-attr]


def test_kube_proxy_covers_every_workers_pods_and_leaves_the_machines_conntrack(
    tmp_path: Path,
) -> None:
    workers = plan.workers(_layout(tmp_path))
    cluster = ipaddress.ip_network(plan.CLUSTER_CIDR)
    for node in workers:
        assert ipaddress.ip_network(node.pod_cidr).subnet_of(cluster)  # type: ignore[arg-type]
        config = json.loads(plan.kube_proxy_config(node, Path("/kc")))
        assert config["mode"] == "iptables"
        assert config["hostnameOverride"] == node.name
        assert config["healthzBindAddress"] == f"{node.address}:{plan.KUBE_PROXY_HEALTHZ}"
        assert config["conntrack"]["maxPerCore"] == 0
        assert config["nodePortAddresses"] == [f"{node.address}/32"]


def test_the_cluster_dns_serves_the_cluster_zone_on_the_stacks_address_and_nothing_else() -> None:
    corefile = dns.corefile("/conf/node.kubeconfig")
    assert f"bind {dns.address()}" in corefile
    assert f"kubernetes {dns.DOMAIN} in-addr.arpa ip6.arpa {{" in corefile
    assert f"kubeconfig /conf/node.kubeconfig {kube.CLUSTER_NAME}" in corefile
    assert "forward" not in corefile, "nothing outside the cluster is reachable"
    assert dns.address() == netns.ADDRESS
    rules = {r: rule["verbs"] for rule in dns.CLUSTER_ROLE["rules"] for r in rule["resources"]}  # type: ignore[index]
    assert rules == {
        r: ["list", "watch"] for r in ("services", "pods", "namespaces", "endpointslices")
    }


def test_only_real_nodes_binaries_wait_until_a_worker_starts() -> None:
    """``make provision`` (and so ``make test``) builds no kubelet, pause image or
    CoreDNS; a worker's servers name them, so its first start builds them."""
    plain = {artifact.name for artifact in registry.provisioned()}
    on_demand = {a.name for a in registry.ARTIFACTS} - plain
    assert on_demand == {"kubernetes-node", "pause", "coredns"}
    needed = {a for s in realnode_servers.SERVERS for a in s.artifacts}
    assert on_demand <= needed
    assert {"kafka", "cassandra", "kubernetes", "etcd"} <= plain
