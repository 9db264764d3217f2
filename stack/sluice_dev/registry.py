"""The catalogue of the local stack: every artifact and every server, by name."""

from __future__ import annotations

from sluice_dev.artifacts import Artifact
from sluice_dev.realnode import servers as realnode
from sluice_dev.servers import (
    cassandra,
    cassandra_secure,
    datastore,
    etcd,
    kafka,
    kube,
    nodeagent,
    pubsub,
    spark,
    tools,
)
from sluice_dev.servers.base import Server

ARTIFACTS: tuple[Artifact, ...] = (
    *kafka.ARTIFACTS,
    *cassandra.ARTIFACTS,
    *spark.ARTIFACTS,
    *etcd.ARTIFACTS,
    *kube.ARTIFACTS,
    *tools.ARTIFACTS,
    *pubsub.ARTIFACTS,
    *realnode.ARTIFACTS,
)

# Start order: a server comes after everything it requires.
SERVERS: tuple[Server, ...] = (
    *etcd.SERVERS,
    *kube.SERVERS,
    *nodeagent.SERVERS,
    *kafka.SERVERS,
    *cassandra.SERVERS,
    *cassandra_secure.SERVERS,
    *datastore.SERVERS,
    *pubsub.SERVERS,
    *realnode.SERVERS,
)


def defaults() -> tuple[Server, ...]:
    """The whole stack, as ``sluice-dev up`` starts it: every server not optional."""
    return tuple(item for item in SERVERS if not item.optional)


def provisioned() -> tuple[Artifact, ...]:
    """What a plain ``provision`` builds or fetches: every artifact but those built on
    demand (real nodes' binaries, when a worker first starts)."""
    return tuple(item for item in ARTIFACTS if not item.on_demand)


def artifact(name: str) -> Artifact:
    for item in ARTIFACTS:
        if item.name == name:
            return item
    raise KeyError(f"no artifact named {name!r}; known: {[a.name for a in ARTIFACTS]}")


def server(name: str) -> Server:
    for item in SERVERS:
        if item.name == name:
            return item
    raise KeyError(f"no server named {name!r}; known: {[s.name for s in SERVERS]}")
