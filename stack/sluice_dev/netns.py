"""The stack's own network namespace: where its servers, its real nodes and their
pods talk to each other, and nothing else.

A real kubelet gives each pod a network namespace of its own, so the pod cannot
reach servers that listen on the machine's loopback, and the machine's other
addresses are out of bounds here (traffic may go to loopback or to addresses
inside namespaces the stack creates, never anywhere else). So, as kind runs a
cluster inside a container, the stack with real nodes runs inside a network
namespace it creates (``sluice-<hash of the stack dir>``): a bridge ``sluice0``
holds the cluster's address, :data:`ADDRESS`, on which every server listens; each
real node is a namespace of its own with a veth on that bridge
(:mod:`sluice_dev.realnode`), and its pods are namespaces behind the node.

Opt-in for now: ``SLUICE_NETNS=1`` makes the stack's commands and the test session
enter the namespace (:func:`enter`) before they start anything, and makes
:data:`sluice_dev.ports.HOST` the cluster's address. Without it the stack runs on
the machine's loopback as before (the node agent's mode). Needs root.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sluice_dev.paths import Layout

ENABLED: Final = os.environ.get("SLUICE_NETNS", "") == "1"
"""The stack runs in its own network namespace (real nodes need it)."""

BRIDGE: Final = "sluice0"
ADDRESS: Final = "10.250.0.1"
"""The cluster's address inside the namespace: the servers', the API server's."""
PREFIX: Final = 24
NETNS_DIR: Final = Path("/run/netns")
_CLONE_NEWNET: Final = 0x40000000


class NetnsError(RuntimeError):
    """A namespace could not be made or entered; the message says which and why."""


def name(layout: Layout) -> str:
    """The namespace of the stack at ``layout.stack``: one per stack directory, so a
    CI rehearsal beside a developer's stack gets its own."""
    return "sluice-" + hashlib.sha256(str(layout.stack).encode()).hexdigest()[:8]


def path(netns: str) -> Path:
    return NETNS_DIR / netns


def ip(*args: str, netns: str | None = None) -> None:
    """``ip [-n NETNS] ARGS``, raising with its message when it fails."""
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    _run(argv)


def sysctl(netns: str, setting: str) -> None:
    _run(["ip", "netns", "exec", netns, "sysctl", "-qw", setting])


def _run(argv: Sequence[str]) -> None:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} failed: {result.stderr.strip()}")


def exists(netns: str) -> bool:
    return path(netns).exists()


def ensure(layout: Layout) -> str:
    """Create the stack's namespace when it does not exist: loopback up, the bridge
    with :data:`ADDRESS`, forwarding on (pods of one node reach those of another
    through it). Returns its name."""
    netns = name(layout)
    if exists(netns):
        return netns
    if os.geteuid() != 0:
        raise NetnsError("the stack's network namespace (SLUICE_NETNS=1) needs root")
    ip("netns", "add", netns)
    ip("link", "set", "lo", "up", netns=netns)
    ip("link", "add", BRIDGE, "type", "bridge", netns=netns)
    ip("addr", "add", f"{ADDRESS}/{PREFIX}", "dev", BRIDGE, netns=netns)
    ip("link", "set", BRIDGE, "up", netns=netns)
    sysctl(netns, "net.ipv4.ip_forward=1")
    return netns


def remove(netns: str) -> None:
    """Delete ``netns`` if it exists (its interfaces go with it)."""
    if exists(netns):
        ip("netns", "delete", netns)


def _inode(target: Path) -> int:
    return os.stat(target).st_ino


def inside(layout: Layout) -> bool:
    """This process already lives in the stack's namespace."""
    netns = path(name(layout))
    return netns.exists() and _inode(netns) == _inode(Path("/proc/self/ns/net"))


def enter(layout: Layout) -> None:
    """Move this process into the stack's namespace (made if missing). Call it before
    any thread starts: ``setns`` moves only the calling thread, and threads started
    later inherit it; children inherit it too."""
    if inside(layout):
        return
    netns = path(ensure(layout))
    libc = ctypes.CDLL(None, use_errno=True)
    with netns.open("rb") as handle:
        if libc.setns(handle.fileno(), _CLONE_NEWNET) != 0:
            raise NetnsError(f"setns({netns}): {os.strerror(ctypes.get_errno())}")


def argv_in(netns: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside ``netns`` (network only: the mounts stay the machine's, so
    a kubelet's volume mounts are seen by its container runtime)."""
    return ["nsenter", f"--net={path(netns)}", "--", *argv]
