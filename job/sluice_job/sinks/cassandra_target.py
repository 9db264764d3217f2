"""Where and how the Cassandra sink writes: the one value both of its sides share.

The driver builds it from the spec; Spark pickles it into every write task, and the
executor side keys its cached sessions and prepared statements by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from sluice_api.sink import CASSANDRA_WRITE_CONCURRENCY
from sluice_job.cassandra_session import Credentials
from sluice_job.sinks.cassandra_batches import Bounds
from sluice_job.tls import TlsMaterial

DEFAULT_CONCURRENCY: Final = CASSANDRA_WRITE_CONCURRENCY
"""Requests in flight per Spark task (each a batch of up to ``Bounds.rows`` rows)."""


@dataclass(frozen=True)
class CassandraTarget:
    """Everything an executor needs to write; picklable, sent with the task."""

    contact_points: tuple[str, ...]
    keyspace: str
    table: str
    credentials: Credentials | None
    concurrency: int = DEFAULT_CONCURRENCY
    bounds: Bounds = field(default_factory=Bounds)
    tls: TlsMaterial | None = None

    def insert(self, columns: Sequence[str]) -> str:
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" for _ in columns)
        return (
            f'INSERT INTO "{self.keyspace}"."{self.table}" ({names}) VALUES ({marks}) '
            "USING TIMESTAMP ?"
        )
