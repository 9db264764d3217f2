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
    monitoring,
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

MONITORING_ARTIFACTS: tuple[Artifact, ...] = monitoring.ARTIFACTS
"""What ``sluice-dev up monitoring`` runs (the Prometheus Operator, Prometheus,
Alertmanager): built by ``provision --monitoring`` or at that server's first start,
never by a plain ``provision``, so ``make test``'s cold provisioning does not pay for
three long Go builds it does not use."""

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
    *monitoring.SERVERS,
)


def defaults() -> tuple[Server, ...]:
    """The whole stack, as ``sluice-dev up`` starts it: every server not optional."""
    return tuple(item for item in SERVERS if not item.optional)


def provisioned(*, monitoring: bool = False) -> tuple[Artifact, ...]:
    """What a plain ``provision`` builds or fetches: every artifact but those built on
    demand (real nodes' binaries, when a worker first starts), plus with
    ``monitoring`` the monitoring servers'."""
    plain = tuple(item for item in ARTIFACTS if not item.on_demand)
    return (*plain, *MONITORING_ARTIFACTS) if monitoring else plain


def every_artifact() -> tuple[Artifact, ...]:
    """Every artifact any server of the stack needs, the monitoring ones included."""
    return (*ARTIFACTS, *MONITORING_ARTIFACTS)


def artifact(name: str) -> Artifact:
    for item in every_artifact():
        if item.name == name:
            return item
    known = [a.name for a in every_artifact()]
    raise KeyError(f"no artifact named {name!r}; known: {known}")


def server(name: str) -> Server:
    for item in SERVERS:
        if item.name == name:
            return item
    raise KeyError(f"no server named {name!r}; known: {[s.name for s in SERVERS]}")
