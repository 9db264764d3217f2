"""Reading what a user would check after a run: committed offsets, the batch
history, the sink's rows, and Kafka's end offsets."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from cassandra import InvalidRequest
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import ServerError
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient


def committed(session: Any, keyspace: str, pipeline_id: str) -> dict[int, int]:
    """Committed positions of the pipeline's (single) topic: partition -> next offset."""
    row = checkpoint_row(session, keyspace, pipeline_id)
    if row is None:
        return {}
    return {int(p): o for parts in json.loads(row.offsets).values() for p, o in parts.items()}


def checkpoint_row(session: Any, keyspace: str, pipeline_id: str) -> Any:
    """The checkpoint row, or ``None`` before the driver created its tables or row."""
    rows = _while_created(
        session, f"SELECT * FROM {keyspace}.checkpoints WHERE pipeline = %s", (pipeline_id,)
    )
    return rows[0] if rows else None


def fence(session: Any, keyspace: str, pipeline_id: str) -> int:
    """The epoch the checkpoint row holds: the last driver to claim the pipeline (0
    before any claim)."""
    row = checkpoint_row(session, keyspace, pipeline_id)
    return 0 if row is None else int(row.epoch)


def history(session: Any, keyspace: str, pipeline_id: str) -> list[Any]:
    """Batch history rows, oldest first; none before the driver created the table."""
    rows = _while_created(
        session, f"SELECT * FROM {keyspace}.batches WHERE pipeline = %s", (pipeline_id,)
    )
    return sorted(rows, key=lambda r: r.batch_id)


def last_batch(session: Any, keyspace: str, pipeline_id: str, epoch: int | None = None) -> int:
    """The last batch committed (by ``epoch``, when given); 0 if none."""
    rows = history(session, keyspace, pipeline_id)
    return max((r.batch_id for r in rows if epoch is None or r.epoch == epoch), default=0)


def _while_created(session: Any, query: str, params: tuple[Any, ...]) -> list[Any]:
    """The rows of a checkpoint table that a starting driver may be creating (or
    altering) while a test polls it: none while the table does not exist yet, or while
    Cassandra answers ``Unknown CF`` for a table whose schema change is under way."""
    try:
        return list(session.execute(query, params))
    except InvalidRequest:
        return []
    except ServerError as err:
        if "Unknown CF" in str(err):
            return []
        raise
    except NoHostAvailable as err:
        # A session whose retry policy gives up on a server error (the secure stack's)
        # reports the same answer wrapped, one error per host.
        if err.errors and all("Unknown CF" in str(e) for e in err.errors.values()):
            return []
        raise


def claims(session: Any, keyspace: str, pipeline_id: str) -> list[Any]:
    rows = session.execute(f"SELECT * FROM {keyspace}.claims WHERE pipeline = %s", (pipeline_id,))
    return sorted(rows, key=lambda r: r.epoch)


def zombie_batches(
    session: Any, keyspace: str, pipeline_id: str, zombie: int, successor: int
) -> tuple[list[int], int]:
    """The batches committed by the driver of epoch ``zombie`` and the batch at which
    the driver of ``successor`` claimed the pipeline: none of the former may follow."""
    claim = next(c for c in claims(session, keyspace, pipeline_id) if c.epoch == successor)
    batches = [
        row.batch_id for row in history(session, keyspace, pipeline_id) if row.epoch == zombie
    ]
    return batches, int(claim.batch_id_at_claim)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-tests"})
    try:
        return {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def events(session: Any, keyspace: str) -> dict[str, Any]:
    """Every row of the events table by event id."""
    rows = session.execute(f"SELECT * FROM {keyspace}.events", timeout=120)
    return {row.event_id: row for row in rows}


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]


def read_topic(bootstrap: str, topic: str, *, timeout: float = 60) -> list[Record]:
    """Every record of ``topic`` up to its current end, in partition/offset order."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "sluice-tests", "enable.auto.commit": False}
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = end_offsets(bootstrap, topic, len(partitions))
        consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(records) < sum(ends.values()) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            headers = {k: (v or b"").decode() for k, v in message.headers() or []}
            records.append(
                Record(
                    message.partition(), message.offset(), message.key(), message.value(), headers
                )
            )
    finally:
        consumer.close()
    if len(records) < sum(ends.values()):
        raise AssertionError(f"read {len(records)} of {sum(ends.values())} records of {topic}")
    return sorted(records, key=lambda r: (r.partition, r.offset))


def group_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """Offsets committed to consumer group ``group``: partition -> offset."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request)[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def tagged_cells(session: Any, keyspace: str) -> dict[str, tuple[str, int]]:
    """Each row of the tagged events table: its tag and that cell's write time."""
    rows = session.execute(f"SELECT event_id, tag, WRITETIME(tag) AS w FROM {keyspace}.events")
    return {row.event_id: (row.tag, int(row.w)) for row in rows}


def consume(
    config: dict[str, Any], topic: str, count: int, *, timeout: float = 30
) -> list[Message]:
    """The first ``count`` records of ``topic`` read through a new consumer group with
    the client ``config`` (bootstrap, security), as a user's consumer reads them."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"{topic}-reader-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received: list[Message] = []
    deadline = time.monotonic() + timeout
    try:
        while len(received) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            received.append(msg)
    finally:
        consumer.close()
    return received


def dead_letter_seqs(bootstrap: str, topic: str, letters_topic: str) -> set[int]:
    """The ``seq`` of each record of ``topic`` whose dead letter is in
    ``letters_topic`` (found by the source partition and offset its headers name)."""
    letters = {
        (int(m.headers["sluice.source.partition"]), int(m.headers["sluice.source.offset"]))
        for m in read_topic(bootstrap, letters_topic)
    }
    source = read_topic(bootstrap, topic)
    return {int(json.loads(r.value)["seq"]) for r in source if (r.partition, r.offset) in letters}
