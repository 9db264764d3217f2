"""The soak's own queries to Cassandra: the sink table, the checkpoint row, the batch
history and the claims, read as a user would with ``cqlsh``.

The connection outlives a Cassandra restart (the driver reconnects every second),
and the reads that poll during faults answer ``None`` instead of raising while
Cassandra is away or before the driver has created its tables.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Final

from cassandra.cluster import Cluster
from cassandra.policies import ConstantReconnectionPolicy, RoundRobinPolicy

from sluice_dev.soak import checks, recovery

SINK_TABLE: Final = "events"
SINK_SCHEMA: Final = """CREATE TABLE IF NOT EXISTS {keyspace}.events (
    event_id text PRIMARY KEY, seq bigint, page text, action text, user_id text,
    event_time timestamp, source_topic text, source_partition int, source_offset bigint)"""
"""The table of ``sluice_job.examples.events`` (one row per event, keyed by id)."""
POLL_SECONDS: Final = 5.0


class Store:
    def __init__(self, contact: str, keyspace: str, pipeline_id: str) -> None:
        host, port = contact.rsplit(":", 1)
        self.cluster = Cluster(
            [host],
            port=int(port),
            reconnection_policy=ConstantReconnectionPolicy(1.0),
            load_balancing_policy=RoundRobinPolicy(),
            protocol_version=5,
            connect_timeout=5,
        )
        self.session = self.cluster.connect()
        self.keyspace, self.pipeline_id = keyspace, pipeline_id

    def close(self) -> None:
        self.cluster.shutdown()

    def reset(self) -> None:
        """An empty sink table and no checkpoint, history or claims of an earlier run
        (a pipeline re-created under the same name would resume from them)."""
        ks = self.keyspace
        self._run(
            f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        for table in (SINK_TABLE, "checkpoints", "batches", "claims", "schema_version"):
            self._run(f"DROP TABLE IF EXISTS {ks}.{table}")
        self._run(SINK_SCHEMA.format(keyspace=ks))

    # -- polled during faults: None while Cassandra or the tables are not there ------

    def commits_after(self, batch_id: int) -> list[recovery.Commit] | None:
        rows = self._poll(
            f"SELECT batch_id, epoch, committed_at, records FROM {self.keyspace}.batches "
            "WHERE pipeline = %s AND batch_id > %s",
            (self.pipeline_id, batch_id),
        )
        return None if rows is None else [_commit(row) for row in rows]

    def last_batch(self) -> int | None:
        """The checkpoint's batch id (``0`` before the first commit)."""
        rows = self._poll(
            f"SELECT batch_id FROM {self.keyspace}.checkpoints WHERE pipeline = %s",
            (self.pipeline_id,),
        )
        if rows is None:
            return None
        return int(rows[0].batch_id or 0) if rows else 0

    def committed(self) -> dict[int, int] | None:
        """The checkpoint's positions (partition -> next offset to read)."""
        rows = self._poll(
            f"SELECT offsets FROM {self.keyspace}.checkpoints WHERE pipeline = %s",
            (self.pipeline_id,),
        )
        if not rows or rows[0].offsets is None:
            return None
        parts = json.loads(rows[0].offsets)
        return {int(p): int(o) for by_topic in parts.values() for p, o in by_topic.items()}

    # -- read once at the end, when everything is up ---------------------------------

    def history(self) -> list[checks.Batch]:
        rows = self._run(
            f"SELECT batch_id, epoch, ranges FROM {self.keyspace}.batches WHERE pipeline = %s",
            (self.pipeline_id,),
        )
        return sorted((_batch(row) for row in rows), key=lambda b: b.batch_id)

    def commits(self) -> list[recovery.Commit]:
        return self.commits_after(-1) or []

    def claims(self) -> list[recovery.Claim]:
        rows = self._run(
            f"SELECT epoch, claimed_at FROM {self.keyspace}.claims WHERE pipeline = %s",
            (self.pipeline_id,),
        )
        return [recovery.Claim(int(row.epoch), _seconds(row.claimed_at)) for row in rows]

    def sink_seqs(self) -> list[int]:
        rows = self._run(f"SELECT seq FROM {self.keyspace}.{SINK_TABLE}", timeout=300)
        return [int(row.seq) for row in rows]

    def _run(self, cql: str, params: tuple[Any, ...] = (), timeout: float = 60) -> list[Any]:
        return list(self.session.execute(cql, params, timeout=timeout))

    def _poll(self, cql: str, params: tuple[Any, ...]) -> list[Any] | None:
        try:
            return self._run(cql, params, timeout=POLL_SECONDS)
        except Exception:  # Cassandra away, or the driver has not made its tables yet
            return None


def _seconds(value: datetime | None) -> float:
    """A Cassandra timestamp (naive, UTC) as seconds since the Unix epoch."""
    return 0.0 if value is None else value.replace(tzinfo=UTC).timestamp()


def _commit(row: Any) -> recovery.Commit:
    return recovery.Commit(
        int(row.batch_id), int(row.epoch), _seconds(row.committed_at), int(row.records or 0)
    )


def _batch(row: Any) -> checks.Batch:
    ranges = {
        int(p): (int(span[0]), int(span[1]))
        for by_topic in json.loads(row.ranges or "{}").values()
        for p, span in by_topic.items()
    }
    return checks.Batch(int(row.batch_id), int(row.epoch), ranges)
