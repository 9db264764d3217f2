"""What makes a Pub/Sub batch replayable and a redelivery recognisable: two tables in
the checkpoint keyspace.

Kafka keeps a batch's records, so a planned range can be read again by whoever
executes it. Pub/Sub does not: a message that was delivered and not acknowledged
comes back later, maybe in another order, mixed with others. So before a batch is
planned, its messages go to the *spool* (``pubsub_spool``, one partition per
batch plan, keyed by the plan's spool id); the plan names the spool id, and a driver
that recovers the planned batch after a crash reads the very same messages back.
Then a batch id still means one set of records forever, and outputs keyed by batch
id (the KPI example's partial counts) are rewritten, never doubled, by a re-run.

Right after the plan, the ids of its messages go to ``pubsub_committed`` (one row per
message id, kept ``source.pubsub.dedupWindowSeconds``). A planned batch is always
committed in the end (its recovery re-executes it), so a message listed there
belongs to a committed batch or to the one batch being recovered; a later delivery
of it is a repeat: acknowledged, never processed again. That is what keeps a
message delivered twice (a crash between commit and acknowledgement, an expired
lease, Pub/Sub's own at-least-once) counted once in the sink.

Costs (``docs/pubsub.md`` has the figures). Per statement, the Python client is
the bottleneck (a few thousand statements a second on a core), so nothing here is
one statement per message: a batch's spool rows share one partition and go in
unlogged batches of a few dozen rows; the ids are partitioned by the hour their
message was published and one of :data:`BUCKETS` hash buckets (a redelivery has
the same id and publish time, so it is looked up in the same partition), so a
batch's ids are marked with one unlogged batch per partition and a pull's ids are
looked up with one ``IN`` query per partition. Partitions stay bounded (an hour of
one bucket), and expire whole with their TTL.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Final

from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType, PreparedStatement

from sluice_job.checkpoint import Batch, CheckpointError
from sluice_job.pubsub.messages import Message

SPOOL_TTL: Final = 7 * 86_400
"""Seconds a planned batch's messages are kept: Pub/Sub's default retention of
unacknowledged messages. A planned batch is normally committed within seconds and
its spool deleted then; a pipeline stopped longer than this with a batch planned
cannot recover it (its driver fails naming the batch)."""
BUCKETS: Final = 16
"""Hash buckets of the ids per hour of publish time (``pubsub_committed``)."""
CHUNK_ROWS: Final = 64
CHUNK_BYTES: Final = 32 * 1024
"""Rows and bytes per unlogged batch: under Cassandra's default
``batch_size_fail_threshold`` (50 KiB), however large the messages."""
CONCURRENCY: Final = 16

Partition = tuple[int, int]
"""(hour of publish time, bucket) of a message id."""


def partition_of(message: Message) -> Partition:
    """Where a message's id is kept (a pure function of its id and publish time)."""
    hour = int(message.publish_time.timestamp() // 3600) if message.publish_time else 0
    return hour, zlib.crc32(message.message_id.encode()) % BUCKETS


def chunks(
    rows: Sequence[tuple[Any, ...]], size_of: Callable[[tuple[Any, ...]], int]
) -> list[list[tuple[Any, ...]]]:
    """``rows`` in order, cut into runs of at most :data:`CHUNK_ROWS` rows and
    :data:`CHUNK_BYTES` bytes (a row larger than that is a run of its own)."""
    result: list[list[tuple[Any, ...]]] = []
    current: list[tuple[Any, ...]] = []
    size = 0
    for row in rows:
        weight = size_of(row)
        if current and (len(current) >= CHUNK_ROWS or size + weight > CHUNK_BYTES):
            result.append(current)
            current, size = [], 0
        current.append(row)
        size += weight
    if current:
        result.append(current)
    return result


@dataclass
class Spool:
    session: Session
    keyspace: str
    pipeline: str
    """The pipeline's checkpoint key (``sluice_api.cluster.checkpoint_key``)."""
    window: int
    """Seconds committed message ids are kept (``dedupWindowSeconds``)."""
    _statements: dict[str, PreparedStatement] = field(default_factory=dict)

    def prepare(self) -> None:
        ks = self.keyspace
        cql = {
            "write": f"""INSERT INTO {ks}.pubsub_spool (pipeline, spool, seq, message_id, data,
                attributes, publish_time, ordering_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                USING TTL {SPOOL_TTL}""",
            "read": f"""SELECT seq, message_id, data, attributes, publish_time, ordering_key
                FROM {ks}.pubsub_spool WHERE pipeline = ? AND spool = ?""",
            "drop": f"DELETE FROM {ks}.pubsub_spool WHERE pipeline = ? AND spool = ?",
            "mark": f"""INSERT INTO {ks}.pubsub_committed (pipeline, hour, bucket, message_id,
                batch_id) VALUES (?, ?, ?, ?, ?) USING TTL {int(self.window)}""",
            "look": f"""SELECT message_id FROM {ks}.pubsub_committed
                WHERE pipeline = ? AND hour = ? AND bucket = ? AND message_id IN ?""",
        }
        for name, text in cql.items():
            self._statements[name] = self.session.prepare(text)

    def write(self, batch: Batch, messages: Sequence[Message]) -> None:
        """Keep ``messages`` (sequence numbers from the batch's start) under its spool."""
        start = batch.ranges[0].start
        rows = [
            (
                self.pipeline,
                batch.spool,
                start + i,
                m.message_id,
                m.data,
                dict(m.attributes),
                m.publish_time,
                m.ordering_key,
            )
            for i, m in enumerate(messages)
        ]
        self._batches("write", chunks(rows, lambda row: len(row[4]) + 64))

    def read(self, batch: Batch) -> tuple[Message, ...]:
        """The messages of a planned batch, in sequence order; raises if the spool no
        longer holds all of them."""
        rows = list(self.session.execute(self._statements["read"], (self.pipeline, batch.spool)))
        messages = tuple(_message(row) for row in sorted(rows, key=lambda r: r.seq))
        if len(messages) != batch.records:
            raise CheckpointError(
                f"planned batch {batch.batch_id}: the spool holds {len(messages)} of its "
                f"{batch.records} messages (kept {SPOOL_TTL // 86_400} days); the batch "
                "cannot be recovered as planned"
            )
        return messages

    def drop(self, batch: Batch) -> None:
        """Forget a committed batch's messages (its ids stay, for deduplication)."""
        self.session.execute(self._statements["drop"], (self.pipeline, batch.spool))

    def mark(self, batch: Batch, messages: Iterable[Message]) -> None:
        """Record the ids of ``messages`` as taken by ``batch`` (idempotent)."""
        groups: dict[Partition, list[tuple[Any, ...]]] = {}
        for m in messages:
            hour, bucket = partition_of(m)
            row = (self.pipeline, hour, bucket, m.message_id, batch.batch_id)
            groups.setdefault((hour, bucket), []).append(row)
        runs = [run for rows in groups.values() for run in chunks(rows, lambda _r: 64)]
        self._batches("mark", runs)

    def committed(self, messages: Iterable[Message]) -> set[str]:
        """Which of ``messages`` belong to a planned (so, in the end, committed) batch."""
        groups: dict[Partition, set[str]] = {}
        for m in messages:
            groups.setdefault(partition_of(m), set()).add(m.message_id)
        queries = [
            (self.pipeline, hour, bucket, sorted(ids)) for (hour, bucket), ids in groups.items()
        ]
        found = self._run([(self._statements["look"], query) for query in queries])
        return {row.message_id for rows in found for row in rows}

    def _batches(self, name: str, runs: Sequence[Sequence[tuple[Any, ...]]]) -> None:
        statement = self._statements[name]
        batches = []
        for run in runs:
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            for row in run:
                batch.add(statement, row)
            batches.append((batch, ()))
        self._run(batches)

    def _run(self, statements: Sequence[tuple[Any, tuple[Any, ...]]]) -> list[list[Any]]:
        if not statements:
            return []
        results = execute_concurrent(
            self.session, statements, concurrency=CONCURRENCY, raise_on_first_error=True
        )
        return [list(result) for _ok, result in results]


def _message(row: Any) -> Message:
    published = row.publish_time
    if published is not None and published.tzinfo is None:
        published = published.replace(tzinfo=UTC)
    return Message(
        message_id=row.message_id,
        data=bytes(row.data or b""),
        attributes=dict(row.attributes or {}),
        publish_time=published,
        ordering_key=row.ordering_key or "",
    )
