"""Where a pipeline's results go: ``spec.sink``, exactly one of a Cassandra table or
Datastore, with the batching and concurrency defaults the driver's writers use.
"""

from __future__ import annotations

from typing import Final, Self

from pydantic import Field, model_validator

from sluice_api.security import Tls
from sluice_api.spec_base import (
    CASSANDRA_NAME,
    CONTACT_POINTS_MAX,
    HostPort,
    Model,
    SecretName,
)

CASSANDRA_BATCH_ROWS: Final = 10
"""Rows per unlogged batch by default: Cassandra's default warning threshold for
the partitions one unlogged batch spans."""
CASSANDRA_BATCH_BYTES: Final = 4096
"""Estimated bytes per batch by default: below Cassandra's 5 KiB warning threshold."""
CASSANDRA_WRITE_CONCURRENCY: Final = 32
"""Requests in flight per Spark task by default."""


class CassandraSink(Model):
    contact_points: list[HostPort] = Field(
        min_length=1,
        max_length=CONTACT_POINTS_MAX,
        description="Cassandra host[:port] contact points.",
    )
    keyspace: str = Field(pattern=CASSANDRA_NAME, max_length=48, description="Keyspace.")
    table: str = Field(pattern=CASSANDRA_NAME, max_length=48, description="Table.")
    credentials_secret: SecretName | None = Field(
        default=None, description="Secret with keys 'username' and 'password'."
    )
    tls: Tls | None = Field(
        default=None,
        description="Connect with TLS (client_encryption_options on the nodes); default: plain.",
    )
    batch_rows: int = Field(
        default=CASSANDRA_BATCH_ROWS,
        ge=1,
        le=1000,
        description=(
            "Most rows per unlogged batch; rows are grouped by the nodes that own them. "
            "1 writes one INSERT per row. Above Cassandra's "
            "unlogged_batch_across_partitions_warn_threshold (10) it logs warnings."
        ),
    )
    batch_bytes: int = Field(
        default=CASSANDRA_BATCH_BYTES,
        ge=256,
        le=49152,
        description=(
            "Most estimated bytes per unlogged batch; keep it below Cassandra's "
            "batch_size_warn_threshold (5 KiB by default). A larger row goes alone."
        ),
    )
    concurrency: int = Field(
        default=CASSANDRA_WRITE_CONCURRENCY,
        ge=1,
        le=1024,
        description="Most write requests in flight per Spark task.",
    )


DATASTORE_WRITE_CONCURRENCY: Final = 4
"""Commits (of up to 500 entities each) in flight per Spark task by default."""


class DatastoreSink(Model):
    project: str = Field(min_length=1, max_length=100, description="Google Cloud project id.")
    kind: str = Field(
        min_length=1, max_length=1500, description="Entity kind written (at most 1500 bytes)."
    )
    namespace: str | None = Field(default=None, max_length=100, description="Datastore namespace.")
    credentials_secret: SecretName | None = Field(
        default=None, description="Secret with key 'credentials.json' (service account)."
    )
    concurrency: int = Field(
        default=DATASTORE_WRITE_CONCURRENCY,
        ge=1,
        le=64,
        description=(
            "Most commits (each of up to 500 entities, Datastore's limit) in flight per "
            "Spark task; a commit sharing a key with one in flight waits for it."
        ),
    )


class Sink(Model):
    """Exactly one destination."""

    cassandra: CassandraSink | None = Field(default=None, description="Cassandra table sink.")
    datastore: DatastoreSink | None = Field(default=None, description="Datastore sink.")
    order_column: str | None = Field(
        default=None,
        pattern=CASSANDRA_NAME,
        max_length=48,
        description=(
            "Output column that orders the writes of one key (latest by event time): a "
            "timestamp, or an integer of milliseconds since 1970. A row replaces the stored "
            "one only if its value is not older, whatever the order its batch ran in "
            "(late events, replays, resets). Cassandra: the cells' write timestamp is the "
            "value in microseconds; Datastore: a transactional compare. Unset: the later "
            "batch wins (docs/writing-a-transform.md)."
        ),
    )

    @model_validator(mode="after")
    def exactly_one(self) -> Self:
        if (self.cassandra is None) == (self.datastore is None):
            raise ValueError("set exactly one of sink.cassandra or sink.datastore")
        return self
