"""The loopback ports of the local stack, chosen away from the well-known defaults so
that the stack does not collide with servers a developer may run by hand.

``SLUICE_PORT_OFFSET`` shifts every port by the same amount, so a second stack (a
CI rehearsal in a fresh clone, with its own ``SLUICE_STACK_DIR``) can run beside the
first on one machine. With ``SLUICE_NETNS=1`` the stack lives in a network
namespace of its own (:mod:`sluice_dev.netns`) and its servers listen on the
cluster's address there, which pods of real nodes can reach, instead of loopback.
"""

import os
import socket
from typing import Final

from sluice_dev import netns

HOST: Final = netns.ADDRESS if netns.ENABLED else "127.0.0.1"
OFFSET: Final = int(os.environ.get("SLUICE_PORT_OFFSET", "0"))

KAFKA: Final = 19092 + OFFSET
KAFKA_CONTROLLER: Final = 19093 + OFFSET
KAFKA_SASL_SSL: Final = 19094 + OFFSET
KAFKA_SSL: Final = 19095 + OFFSET
CASSANDRA_NATIVE: Final = 19042 + OFFSET
CASSANDRA_STORAGE: Final = 17000 + OFFSET
CASSANDRA_SECURE_NATIVE: Final = 19043 + OFFSET
CASSANDRA_SECURE_STORAGE: Final = 17001 + OFFSET
ETCD_CLIENT: Final = 12379 + OFFSET
ETCD_PEER: Final = 12380 + OFFSET
KUBE_APISERVER: Final = 16443 + OFFSET
KUBE_CONTROLLER_MANAGER: Final = 20257 + OFFSET
KUBE_SCHEDULER: Final = 20259 + OFFSET
NODE_AGENT: Final = 20250 + OFFSET
DATASTORE: Final = 18081 + OFFSET
DATASTORE_CONTROL: Final = 18082 + OFFSET
PUBSUB: Final = 18085 + OFFSET
PUBSUB_CONTROL: Final = 18086 + OFFSET
CLUSTER_DNS_HEALTH: Final = 18180 + OFFSET
CLUSTER_DNS_READY: Final = 18181 + OFFSET
PROMETHEUS: Final = 19090 + OFFSET
ALERTMANAGER: Final = 19193 + OFFSET
PROMETHEUS_OPERATOR: Final = 19190 + OFFSET


def free() -> int:
    """A loopback port free at the moment, for a process started beside the stack's
    fixed ones (an operator of ``sluice-dev operator start``)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])
