"""PySpark with the provisioned Kafka source reads exactly the offset ranges it is
given, the way Sluice's driver reads a planned micro-batch: per-partition start
(inclusive) and end (exclusive) offsets, nothing more, nothing less."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from sluice_dev.servers import spark

pytestmark = pytest.mark.integration

RECORDS = 100
PARTITIONS = 2


def _produce(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Record ``i`` goes to partition ``i % 2``; returns ``(offset, key, value)`` per
    partition as the broker acknowledged them."""
    acked: dict[int, list[tuple[int, bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        assert err is None, f"delivery failed: {err}"
        partition, offset, key, value = msg.partition(), msg.offset(), msg.key(), msg.value()
        assert partition is not None
        assert offset is not None
        assert isinstance(key, bytes)
        assert isinstance(value, bytes)
        acked[partition].append((offset, key, value))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            partition=i % PARTITIONS,
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0, "records still queued after 30 s"
    return acked


def test_batch_read_returns_exactly_the_requested_offset_ranges(
    spark_session: Any, kafka_bootstrap: str, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=PARTITIONS)
    acked = _produce(kafka_bootstrap, topic)
    assert {p: len(records) for p, records in acked.items()} == {0: 50, 1: 50}

    start = {0: 10, 1: 25}
    end = {0: 20, 1: 40}  # exclusive
    frame = (
        spark_session.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("assign", json.dumps({topic: list(range(PARTITIONS))}))
        .option("startingOffsets", json.dumps({topic: {str(p): o for p, o in start.items()}}))
        .option("endingOffsets", json.dumps({topic: {str(p): o for p, o in end.items()}}))
        .load()
    )
    got = sorted(
        (r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value))
        for r in frame.select("topic", "partition", "offset", "key", "value").collect()
    )

    expected = sorted(
        (topic, p, offset, key, value)
        for p, records in acked.items()
        for offset, key, value in records
        if start[p] <= offset < end[p]
    )
    assert len(expected) == (20 - 10) + (40 - 25)
    assert got == expected
    # Partition p holds records p, p+2, p+4, ...: offset o of partition p is v{2o+p}.
    assert got[0][2:] == (10, b"k20", b"v20")
    assert got[-1][2:] == (39, b"k79", b"v79")


def test_spark_jars_add_only_what_pyspark_lacks(spark_jars: tuple[Path, ...]) -> None:
    shipped = spark.pyspark_jars_dir()
    assert shipped is not None
    pyspark_artifacts = {spark.artifact_id(jar) for jar in shipped.glob("*.jar")}
    added = {spark.artifact_id(Path(jar)) for jar in spark_jars}

    assert added == set(spark.REQUIRED)
    assert added.isdisjoint(pyspark_artifacts)
