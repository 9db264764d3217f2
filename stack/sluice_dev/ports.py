"""The loopback ports of the local stack, chosen away from the well-known defaults so
that the stack does not collide with servers a developer may run by hand."""

from typing import Final

HOST: Final = "127.0.0.1"

KAFKA: Final = 19092
KAFKA_CONTROLLER: Final = 19093
CASSANDRA_NATIVE: Final = 19042
CASSANDRA_STORAGE: Final = 17000
ETCD_CLIENT: Final = 12379
ETCD_PEER: Final = 12380
KUBE_APISERVER: Final = 16443
KUBE_CONTROLLER_MANAGER: Final = 20257
KUBE_SCHEDULER: Final = 20259
NODE_AGENT: Final = 20250
