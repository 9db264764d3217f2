"""Where a pipeline commits its offsets: ``spec.checkpoint``, the Cassandra store
whose commits fence older drivers, and how the driver may create its keyspace.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Self

from pydantic import Field, model_validator

from sluice_api.security import Tls
from sluice_api.spec_base import (
    CASSANDRA_MAX_TTL,
    CASSANDRA_NAME,
    CONTACT_POINTS_MAX,
    HostPort,
    Model,
    SecretName,
)


class ReplicationStrategy(StrEnum):
    NETWORK_TOPOLOGY = "NetworkTopologyStrategy"
    SIMPLE = "SimpleStrategy"


DATACENTER = r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,63}$"


class KeyspaceReplication(Model):
    """How the driver creates the checkpoint keyspace (``createKeyspace``)."""

    strategy: ReplicationStrategy = Field(
        default=ReplicationStrategy.NETWORK_TOPOLOGY,
        description=(
            "NetworkTopologyStrategy (production: replicas per datacenter) or "
            "SimpleStrategy (one datacenter, development)."
        ),
    )
    datacenters: dict[str, Annotated[int, Field(ge=1, le=12)]] = Field(
        default_factory=dict,
        max_length=16,
        description=(
            "NetworkTopologyStrategy: replicas per datacenter, e.g. {dc1: 3}. Three "
            "replicas per datacenter keep the fencing row through the loss of one node "
            "(LWTs need a quorum of replicas)."
        ),
    )
    replication_factor: int | None = Field(
        default=None,
        ge=1,
        le=12,
        description=(
            "SimpleStrategy: replicas in the cluster. 1 loses the checkpoint (and the "
            "fencing row) with its node: for a single-node development cluster only."
        ),
    )

    @model_validator(mode="after")
    def _complete(self) -> Self:
        for name in self.datacenters:
            if not re.match(DATACENTER, name):
                raise ValueError(f"datacenter name {name!r} does not match {DATACENTER}")
        if self.strategy is ReplicationStrategy.SIMPLE:
            if self.replication_factor is None or self.datacenters:
                raise ValueError("SimpleStrategy takes replicationFactor (and no datacenters)")
        elif not self.datacenters or self.replication_factor is not None:
            raise ValueError(
                "NetworkTopologyStrategy takes datacenters, e.g. {dc1: 3} (and no "
                "replicationFactor)"
            )
        return self

    def cql(self) -> str:
        """The ``replication`` map of CREATE KEYSPACE."""
        entries = {"class": self.strategy.value}
        if self.strategy is ReplicationStrategy.SIMPLE:
            entries["replication_factor"] = str(self.replication_factor)
        else:
            entries |= {dc: str(n) for dc, n in sorted(self.datacenters.items())}
        return "{" + ", ".join(f"'{key}': '{value}'" for key, value in entries.items()) + "}"


class CassandraCheckpoint(Model):
    contact_points: list[HostPort] = Field(
        min_length=1,
        max_length=CONTACT_POINTS_MAX,
        description="Cassandra host[:port] contact points.",
    )
    keyspace: str = Field(
        default="sluice",
        pattern=CASSANDRA_NAME,
        max_length=48,
        description=(
            "Keyspace of the checkpoint tables. It must exist unless createKeyspace is "
            "set; the driver creates its tables in it."
        ),
    )
    create_keyspace: bool = Field(
        default=False,
        description=(
            "Create the keyspace if it is missing, with `replication`. Off (the default), "
            "a missing keyspace ends the driver with exit 2 naming it: a keyspace's "
            "replication decides whether the fencing row survives the loss of a node, so "
            "it is never chosen silently."
        ),
    )
    replication: KeyspaceReplication | None = Field(
        default=None,
        description="Replication of the keyspace if the driver creates it (createKeyspace).",
    )
    credentials_secret: SecretName | None = Field(
        default=None, description="Secret with keys 'username' and 'password'."
    )
    tls: Tls | None = Field(
        default=None,
        description="Connect with TLS (client_encryption_options on the nodes); default: plain.",
    )
    history_ttl_seconds: int = Field(
        default=30 * 24 * 3600,
        ge=0,
        le=CASSANDRA_MAX_TTL,
        description="TTL of batch history rows; 0 keeps them; at most 20 years (Cassandra's).",
    )

    @model_validator(mode="after")
    def _replication_to_create(self) -> Self:
        if self.create_keyspace and self.replication is None:
            raise ValueError("createKeyspace needs replication (strategy and replicas)")
        return self


class Checkpoint(Model):
    cassandra: CassandraCheckpoint = Field(description="Checkpoint store.")
