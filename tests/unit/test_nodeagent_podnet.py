"""Each pod's own loopback address, from its uid: what lets two Spark drivers on one
machine bind the same fixed ports; and how it is reported in the pod's status."""

from __future__ import annotations

import ipaddress
import uuid
from datetime import UTC, datetime

import pytest

from sluice_dev.nodeagent.podnet import HOST_IP, SPACE, pod_ip
from sluice_dev.nodeagent.status import status_patch

pytestmark = pytest.mark.unit

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
MACHINE = ipaddress.ip_network("127.0.0.0/24")


def test_distinct_pods_get_distinct_loopback_addresses_outside_127_0_0() -> None:
    uids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"pod-{n}")) for n in range(500)]
    ips = [pod_ip(uid) for uid in uids]
    assert len(set(ips)) == len(ips)
    for text in ips:
        address = ipaddress.ip_address(text)
        assert address in LOOPBACK
        assert address not in MACHINE
        assert text.rsplit(".", 1)[1] not in ("0", "255")
    assert HOST_IP not in ips


def test_a_pods_address_is_the_same_whoever_computes_it_and_whenever() -> None:
    uid = "7f0c2a9e-4b1d-4c8e-9a3f-0d6b5e2c1a77"
    assert pod_ip(uid) == pod_ip(str(uuid.UUID(uid)))
    assert pod_ip(uid) == "127.133.255.252"  # a restarted agent reports the same one


def test_the_address_space_is_the_documented_size() -> None:
    assert SPACE == 65_535 * 254


def test_the_status_patch_replaces_an_ip_an_earlier_agent_reported() -> None:
    """A pod reported with 127.0.0.1 (before per-pod IPs) must get its own IP, not a
    second one: the API server refuses two IPs of one family."""
    moment = datetime(2026, 11, 26, tzinfo=UTC)
    patch = status_patch([], {}, moment, HOST_IP, "127.9.8.7")["status"]
    assert patch["podIP"] == "127.9.8.7"
    assert patch["podIPs"] == [{"$patch": "replace"}, {"ip": "127.9.8.7"}]
    assert patch["hostIP"] == HOST_IP
