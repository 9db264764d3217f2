"""The soak's own reads of Kafka, all as a ``read_committed`` reader: the last stable
offset of every partition, the sequence numbers a consumer can see in the source
topic, and the dead letters with their reason."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition

# OffsetSpec is missing from the package's stubs, not from the package.
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from sluice_dev.soak import checks
from sluice_dev.soak.producer import QUIET

REASON_HEADER = "sluice.reason"
"""The dead-letter header with the reason (``sluice_job.deadletter.Header``)."""


def last_stable_offsets(bootstrap: str, topic: str, timeout: float = 30) -> dict[int, int]:
    """Partition -> last stable offset: the end of the log a ``read_committed`` reader
    may read, below any transaction still open."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": QUIET})
    partitions = admin.list_topics(topic, timeout=timeout).topics[topic].partitions
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(topic, p): latest for p in partitions}
    futures = admin.list_offsets(
        request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout
    )
    return {tp.partition: int(f.result(timeout=timeout).offset) for tp, f in futures.items()}


def visible_seqs(bootstrap: str, topic: str) -> list[int]:
    """Sequence numbers (from the keys ``k-<seq>``) of every committed record."""
    return [_seq(message.key()) for message in _read_committed(bootstrap, topic)]


def dead_letters(bootstrap: str, topic: str) -> list[checks.DeadLetter]:
    """Every dead letter: the record's sequence number (its key is kept) and reason."""
    letters = []
    for message in _read_committed(bootstrap, topic):
        headers = {k: (v or b"").decode() for k, v in message.headers() or []}
        letters.append(checks.DeadLetter(_seq(message.key()), headers.get(REASON_HEADER, "")))
    return letters


def _seq(key: bytes | None) -> int:
    return int((key or b"k--1").decode().removeprefix("k-"))


def _read_committed(bootstrap: str, topic: str, timeout: float = 300) -> Iterator[Any]:
    """Every record a ``read_committed`` reader sees in ``topic``, up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"sluice-soak-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "log_level": QUIET,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending = set(partitions)
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(pending)} not read to the end")
            for message in consumer.consume(1000, timeout=1.0):
                error = message.error()
                if error is None:
                    yield message
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {error}")
    finally:
        consumer.close()
