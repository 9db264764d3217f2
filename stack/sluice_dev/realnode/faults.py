"""A pod's network cut and healed, as a real network fails: the pod's packets dropped
in both directions (no reset, no error: connections hang until their timeouts),
while its node, its kubelet and every other pod carry on.

The cut is two ``iptables`` rules in the pod's own network namespace (the one
containerd made for its sandbox, ``/run/netns/cni-*``), found by the pod's IP: they
drop everything that is not loopback. The pod's containers can restart during a cut
and stay cut (the namespace is the sandbox's, not a container's); healing deletes
the rules.
"""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
from typing import Final

from sluice_dev import netns
from sluice_dev.realnode.runtime import NodeError

RULES: Final = (("INPUT", "-i"), ("OUTPUT", "-o"))
"""Each chain and the flag naming the interface a rule leaves alone (loopback)."""


def pod_netns(pod_ip: str) -> str:
    """The name of the network namespace holding ``pod_ip`` (on its ``eth0``)."""
    address = str(ipaddress.ip_address(pod_ip))
    for entry in sorted(netns.NETNS_DIR.glob("cni-*")):
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            shown = subprocess.run(
                ["ip", "-n", entry.name, "-4", "-o", "addr", "show", "dev", "eth0"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout
            if f" {address}/" in shown:
                return entry.name
    raise NodeError(f"no pod network namespace holds {address}")


def cut(pod_ip: str) -> str:
    """Drop every packet of the pod at ``pod_ip`` but loopback's; its namespace."""
    name = pod_netns(pod_ip)
    for chain, flag in RULES:
        _iptables(name, "-I", chain, "1", "!", flag, "lo", "-j", "DROP")
    return name


def heal(name: str) -> None:
    """Delete the rules :func:`cut` added to namespace ``name``."""
    for chain, flag in RULES:
        _iptables(name, "-D", chain, "!", flag, "lo", "-j", "DROP")


def is_cut(name: str) -> bool:
    listed = subprocess.run(
        ["ip", "netns", "exec", name, "iptables", "-w", "-S"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    return all(f"-A {chain} ! {flag} lo -j DROP" in listed for chain, flag in RULES)


def _iptables(name: str, *args: str) -> None:
    argv = ["ip", "netns", "exec", name, "iptables", "-w", *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        raise NodeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
