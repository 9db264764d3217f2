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

Costs (``docs/pubsub.md`` has the figures): per batch, one spool row per message
(its data), one id row per message, and one read per delivered message to look it
up; all as concurrent single-partition statements.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Final

from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import PreparedStatement

from sluice_job.checkpoint import Batch, CheckpointError
from sluice_job.pubsub.messages import Message

SPOOL_TTL: Final = 7 * 86_400
"""Seconds a planned batch's messages are kept: Pub/Sub's default retention of
unacknowledged messages. A planned batch is normally committed within seconds and
its spool deleted then; a pipeline stopped longer than this with a batch planned
cannot recover it (its driver fails naming the batch)."""
CONCURRENCY: Final = 64


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
            "mark": f"""INSERT INTO {ks}.pubsub_committed (pipeline, message_id, batch_id)
                VALUES (?, ?, ?) USING TTL {int(self.window)}""",
            "look": f"""SELECT message_id FROM {ks}.pubsub_committed
                WHERE pipeline = ? AND message_id = ?""",
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
        self._all("write", rows)

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
        self._all("mark", [(self.pipeline, m.message_id, batch.batch_id) for m in messages])

    def committed(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` belong to a planned (so, in the end, committed) batch."""
        unique = sorted(set(ids))
        results = self._all("look", [(self.pipeline, i) for i in unique])
        return {i for i, rows in zip(unique, results, strict=True) if rows}

    def _all(self, name: str, rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
        if not rows:
            return []
        results = execute_concurrent_with_args(
            self.session,
            self._statements[name],
            rows,
            concurrency=CONCURRENCY,
            raise_on_first_error=True,
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
