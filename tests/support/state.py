"""Reading what a user would check after a run: committed offsets, the batch
history, the sink's rows, and Kafka's end offsets."""

from __future__ import annotations

import json
from typing import Any

from cassandra import InvalidRequest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition


def committed(session: Any, keyspace: str, pipeline_id: str) -> dict[int, int]:
    """Committed positions of the pipeline's (single) topic: partition -> next offset."""
    row = checkpoint_row(session, keyspace, pipeline_id)
    if row is None:
        return {}
    return {int(p): o for parts in json.loads(row.offsets).values() for p, o in parts.items()}


def checkpoint_row(session: Any, keyspace: str, pipeline_id: str) -> Any:
    """The checkpoint row, or ``None`` before the driver created its tables or row."""
    try:
        return session.execute(
            f"SELECT * FROM {keyspace}.checkpoints WHERE pipeline = %s", (pipeline_id,)
        ).one()
    except InvalidRequest:
        return None


def history(session: Any, keyspace: str, pipeline_id: str) -> list[Any]:
    """Batch history rows, oldest first."""
    rows = session.execute(f"SELECT * FROM {keyspace}.batches WHERE pipeline = %s", (pipeline_id,))
    return sorted(rows, key=lambda r: r.batch_id)


def claims(session: Any, keyspace: str, pipeline_id: str) -> list[Any]:
    rows = session.execute(f"SELECT * FROM {keyspace}.claims WHERE pipeline = %s", (pipeline_id,))
    return sorted(rows, key=lambda r: r.epoch)


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
