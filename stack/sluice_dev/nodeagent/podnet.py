"""Each pod's own IP address: a loopback address derived from its uid.

A kubelet's pods each get an IP of their own, so two Spark drivers can both bind
their fixed ports (7078, 7079, 8090) on ``status.podIP``. Here every process shares
the machine's network, but Linux routes the whole of 127.0.0.0/8 to ``lo``: a
process can bind 127.23.4.5 with no setup at all. So a pod's IP is an address of
that block picked by a hash of its uid: the same for the same pod whoever computes
it (the status the agent reports, the ``fieldRef`` its containers see, an agent
restarted after a crash), different for different pods with high odds.

The block used is ``127.A.B.C`` with ``(A, B) != (0, 0)`` (127.0.0.x stays for the
machine's own servers, ``status.hostIP`` is 127.0.0.1) and ``C`` in 1..254 (no
address that looks like a network or a broadcast address): 65,535 x 254 =
16,645,890 addresses. Two given pods collide with odds 1 in 16.6 million; among
``n`` pods alive at once, about ``n**2 / 33.3e6``: 3 in a million for 10 pods, 3 in
10,000 for 100. A collision shows as a bind error (``EADDRINUSE``) in one pod, only
if both bind the same port.
"""

from __future__ import annotations

import hashlib
from typing import Final

HOST_IP: Final = "127.0.0.1"
"""The node's address (``status.hostIP``, the Node's InternalIP)."""

_LAST_OCTETS: Final = 254
_SUBNETS: Final = 256 * 256 - 1
SPACE: Final = _SUBNETS * _LAST_OCTETS
"""How many distinct pod IPs there are."""


def pod_ip(uid: str) -> str:
    """The IP of the pod with ``uid``: in 127.0.0.0/8, never in 127.0.0.0/24."""
    digest = hashlib.sha256(uid.encode()).digest()
    index = int.from_bytes(digest[:8], "big") % SPACE
    subnet, host = divmod(index, _LAST_OCTETS)
    subnet += 1  # skip 127.0.0.x
    return f"127.{subnet >> 8}.{subnet & 0xFF}.{host + 1}"
