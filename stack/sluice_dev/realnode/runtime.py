"""The I/O of a real node: its network namespace and veth, its cgroups, its files, the
images its containerd holds, and undoing all of it.

A worker's namespace is made once and kept while its kubelet and containerd come
and go (a restarted kubelet finds its pods where they were); ``down`` removes it
after killing what runs in the worker's cgroups and unmounting what containerd and
the kubelet mounted under the worker's directories.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from sluice_dev import netns
from sluice_dev.realnode.plan import Worker

CGROUPS = Path("/sys/fs/cgroup")


class NodeError(RuntimeError):
    """A real node could not be set up; the message names the step."""


def plumb(node: Worker) -> None:
    """The worker's namespace with ``eth0`` on the stack's bridge, its node address,
    a default route through the stack's address, forwarding on for its pods, and the
    stack's route to its pods. Idempotent."""
    stack = node.stack_netns
    if not netns.exists(stack):
        raise NodeError(f"the stack's network namespace {stack} does not exist")
    if netns.exists(node.netns):
        return
    netns.ip("netns", "add", node.netns)
    try:
        netns.ip("link", "set", "lo", "up", netns=node.netns)
        netns.ip(
            "link", "add", node.veth, "type", "veth", "peer", "name", "eth0",
            "netns", node.netns, netns=stack,
        )  # fmt: skip
        netns.ip("link", "set", node.veth, "master", netns.BRIDGE, "up", netns=stack)
        netns.ip("addr", "add", f"{node.address}/{netns.PREFIX}", "dev", "eth0", netns=node.netns)
        netns.ip("link", "set", "eth0", "up", netns=node.netns)
        netns.ip("route", "add", "default", "via", netns.ADDRESS, netns=node.netns)
        netns.sysctl(node.netns, "net.ipv4.ip_forward=1")
        netns.ip("route", "replace", node.pod_cidr, "via", node.address, netns=stack)
    except netns.NetnsError:
        netns.remove(node.netns)
        raise


def cgroup_dirs(node: Worker) -> list[Path]:
    """The worker's ``cgroupRoot`` in every cgroup v1 hierarchy mounted here."""
    if not CGROUPS.is_dir():
        return []
    return [
        hierarchy / node.cgroup_root.lstrip("/")
        for hierarchy in sorted(CGROUPS.iterdir())
        if hierarchy.is_dir() and (hierarchy / "cgroup.procs").exists()
    ]


def make_cgroups(node: Worker) -> None:
    """The kubelet wants its ``cgroupRoot`` to exist in every hierarchy."""
    for directory in cgroup_dirs(node):
        directory.mkdir(exist_ok=True)


def answers(sock: Path) -> bool:
    """Whether a unix socket accepts a connection (containerd is serving)."""
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(2)
        try:
            client.connect(str(sock))
        except OSError:
            return False
    return True


def healthz(url: str) -> str | None:
    """``None`` when ``url`` answers 200, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return None if response.status == 200 else f"{url} answered {response.status}"
    except urllib.error.HTTPError as err:
        return f"{url} answered {err.code}"
    except OSError as err:
        return f"{url} unreachable ({err})"


def ctr(node: Worker, *args: str, timeout: float = 600) -> str:
    """``ctr`` against the worker's containerd, in the kubelet's namespace (k8s.io)."""
    argv = ["ctr", "--address", str(node.socket), "--namespace", "k8s.io", *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise NodeError(f"{' '.join(argv)} failed: {result.stderr.strip()[-2000:]}")
    return result.stdout


def images(node: Worker) -> dict[str, str]:
    """The worker's images: each name and the digest of its manifest."""
    rows = ctr(node, "images", "list").splitlines()[1:]  # REF TYPE DIGEST SIZE ...
    return {cols[0]: cols[2] for cols in (row.split() for row in rows) if len(cols) > 2}


CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"


def archived(archive: Path) -> tuple[str, str]:
    """The name ``ctr images import`` gives the image in an OCI archive (containerd's
    own annotation, else the OCI reference name: podman's archives carry the whole
    name there, the pause image's only its tag), and its manifest's digest."""
    with tarfile.open(archive) as tar:
        index = tar.extractfile("index.json")
        if index is None:
            raise NodeError(f"{archive} is not an OCI archive (no index.json)")
        [manifest] = json.load(index)["manifests"]
    annotations = manifest["annotations"]
    name = annotations.get(CONTAINERD_NAME) or annotations[REF_NAME]
    return str(name), str(manifest["digest"])


def load(node: Worker, name: str, archive: Path) -> bool:
    """Make ``name`` on the worker the image of the OCI archive ``archive``, importing it
    unless the worker has that very image under that name (the same manifest digest:
    a moving tag such as ``:dev``, rebuilt, is imported again); whether it imported."""
    saved_as, digest = archived(archive)
    if images(node).get(name) == digest:
        return False
    ctr(node, "images", "import", str(archive))
    if saved_as != name:  # the archive of that image id was saved under another name
        ctr(node, "images", "tag", "--force", saved_as, name)
    if images(node).get(name) != digest:
        raise NodeError(f"{archive} imported, but the worker's {name} is not its image")
    return True


def tag(node: Worker, name: str, aliases: Sequence[str]) -> None:
    """Give the worker's image ``name`` each of ``aliases`` too, moving an alias that
    names another image (``ctr images tag --force``)."""
    found = images(node)
    moved = [alias for alias in aliases if found.get(alias) != found[name]]
    if moved:
        ctr(node, "images", "tag", "--force", name, *moved)


def _cgroup_pids(node: Worker) -> set[int]:
    pids: set[int] = set()
    for directory in cgroup_dirs(node):
        if not directory.is_dir():
            continue
        for procs in directory.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in procs.read_text().split())
    return pids


def container_pids(node: Worker, pod_uid: str, container_id: str) -> set[int]:
    """The processes of one container (``status.containerStatuses[].containerID``
    without its ``containerd://``), found in the worker's cgroups: what a machine's
    admin kills to crash a container."""
    pids: set[int] = set()
    for directory in cgroup_dirs(node):
        for pod in directory.rglob(f"pod{pod_uid}"):
            procs = pod / container_id / "cgroup.procs"
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in procs.read_text().split())
    return pids


def kill_pods(node: Worker, timeout: float = 10.0) -> int:
    """SIGKILL every process in the worker's cgroups (its containers); how many."""
    deadline = time.monotonic() + timeout
    killed: set[int] = set()
    while (pids := _cgroup_pids(node)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed |= pids
        time.sleep(0.1)
    return len(killed)


def kill_shims(node: Worker) -> int:
    """SIGKILL the worker's containerd shims (one per pod, outliving containerd, in
    the worker's namespace, whose veths they keep alive); how many."""
    needle = str(node.socket).encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and needle in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed


def _mounts_under(roots: list[Path]) -> list[str]:
    points: list[str] = []
    with open("/proc/self/mountinfo") as info:
        for line in info:
            point = line.split()[4].replace("\\040", " ")
            if any(point == str(root) or point.startswith(f"{root}/") for root in roots):
                points.append(point)
    return points


def unmount(node: Worker) -> None:
    """Lazily unmount what containerd and the kubelet mounted under the worker's
    directories (container root filesystems, volumes, shm), deepest first."""
    for point in sorted(_mounts_under([node.data, node.run]), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def remove_cgroups(node: Worker) -> None:
    for directory in cgroup_dirs(node):
        if not directory.is_dir():
            continue
        for sub in sorted(directory.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if sub.is_dir():
                with contextlib.suppress(OSError):
                    sub.rmdir()
        with contextlib.suppress(OSError):
            directory.rmdir()


def _netns_in_use() -> set[int]:
    inodes: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                inodes.add(os.stat(entry / "ns" / "net").st_ino)
    return inodes


def _only_loopback(name: str) -> bool:
    links = subprocess.run(
        ["ip", "-n", name, "-o", "link"], capture_output=True, text=True, check=False
    )
    return links.returncode == 0 and len(links.stdout.splitlines()) <= 1


def sweep_pod_namespaces(min_age: float = 30.0, settle: float = 5.0) -> list[str]:
    """Delete the pod namespaces containerd left behind (``/run/netns/cni-*``) that
    are dead to everyone: no process in them, older than ``min_age`` seconds (one
    being set up for a pod of another stack has no process yet either), and no
    interface but loopback once their veth is gone with the worker (the kernel takes
    a moment: up to ``settle`` seconds). containerd removes a pod's namespace when the
    pod stops; a worker torn down with pods running leaves them. The names deleted."""
    in_use = _netns_in_use()
    candidates = []
    for entry in sorted(netns.NETNS_DIR.glob("cni-*")):
        with contextlib.suppress(OSError):
            info = os.stat(entry)
            if info.st_ino not in in_use and time.time() - info.st_mtime > min_age:
                candidates.append(entry.name)
    deleted = []
    deadline = time.monotonic() + settle
    while candidates:
        for name in [n for n in candidates if _only_loopback(n)]:
            candidates.remove(name)
            with contextlib.suppress(netns.NetnsError):
                netns.remove(name)
                deleted.append(name)
        if not candidates or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return deleted


def tear_down(node: Worker) -> None:
    """Undo a worker after its kubelet and containerd stopped: its containers killed,
    its mounts gone, its cgroups and network namespace removed, its run dir emptied,
    its pods' namespaces deleted."""
    kill_shims(node)
    kill_pods(node)
    unmount(node)
    remove_cgroups(node)
    netns.remove(node.netns)
    shutil.rmtree(node.run, ignore_errors=True)
    sweep_pod_namespaces()
