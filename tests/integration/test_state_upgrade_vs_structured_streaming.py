"""The upgrade a user makes most often, side by side (issue 41, "done when"): v2 of a
per-page aggregation keeps one more value per key. Spark's Structured Streaming,
restarted from v1's checkpoint with v2's aggregation, refuses to start: its state
store is tied to the query plan's schema. Sluice's state is rows with columns: v2
declares the new column, the table gains it, v1's rows read it as null and the
totals go on exactly. Both read the same Kafka topic with the same Spark session."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_job import transform
from sluice_job.state import States
from sluice_job.state import write as state_write
from sluice_job.transform import TransformResult
from sluice_job.write_order import write_version
from tests.support.keyed_state import prepared

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

EVENT = "page string, user string, ts long"
V1 = {
    "name": "pages",
    "table": "page_views",
    "key": [{"name": "page", "type": "text"}],
    "columns": [{"name": "views", "type": "bigint"}],
}
V2 = {**V1, "columns": [*V1["columns"], {"name": "last_ts", "type": "bigint"}]}


def produce(bootstrap: str, topic: str, events: list[tuple[str, str, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for page, user, ts in events:
        producer.produce(topic, json.dumps({"page": page, "user": user, "ts": ts}).encode())
    assert producer.flush(30) == 0


def parsed(frame: DataFrame) -> DataFrame:
    event = F.from_json(F.col("value").cast("string"), EVENT).alias("e")
    return frame.select(event).select("e.*")


def structured_streaming(
    spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path, *, v2: bool
) -> Any:
    """The aggregation as a Structured Streaming query run to the topic's end."""
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    values = [F.count(F.lit(1)).alias("views")]
    if v2:
        values.append(F.max("ts").alias("last_ts"))
    return (
        parsed(source)
        .groupBy("page")
        .agg(*values)
        .writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def page_views(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    """v1 and v2 in one function: v2 (its state declares last_ts) also keeps it."""
    del options
    events = parsed(records)
    v2 = "last_ts" in state["pages"].columns
    values = [F.count(F.lit(1)).alias("n")] + ([F.max("ts").alias("batch_ts")] if v2 else [])
    touched = events.groupBy("page").agg(*values)
    joined = touched.join(state["pages"].lookup(touched), "page", "left")
    new = joined.select(
        "page",
        (F.coalesce(F.col("views"), F.lit(0)) + F.col("n")).alias("views"),
        *([F.greatest(F.col("last_ts"), F.col("batch_ts")).alias("last_ts")] if v2 else []),
    )
    return TransformResult(new, state={"pages": new})


def sluice_batch(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    states: States,
    version: int,
    offsets: tuple[int, int],
) -> dict[str, tuple[Any, ...]]:
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": offsets[0]}}))
        .option("endingOffsets", json.dumps({topic: {"0": offsets[1]}}))
        .load()
    )
    batch = states.at(version)
    result = transform.apply(page_views, records, {}, batch)
    rows = {r["page"]: tuple(r)[1:] for r in result.output.collect()}
    state_write.write(batch["pages"], result.state["pages"], write_version(version, 1))
    return rows


def test_v2_of_an_aggregation_breaks_structured_streamings_checkpoint_not_sluices_state(
    spark_session: SparkSession,
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra: Any,
    cassandra_contact: str,
    cassandra_keyspace: str,
    tmp_path: Path,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, [("/a", "u1", 10), ("/a", "u2", 20), ("/b", "u1", 30)])

    # Structured Streaming: v1 runs, v2 cannot start from v1's checkpoint.
    checkpoint = tmp_path / "checkpoint"
    v1_query = structured_streaming(spark_session, kafka_bootstrap, topic, checkpoint, v2=False)
    v1_query.awaitTermination(120)
    assert v1_query.exception() is None
    produce(kafka_bootstrap, topic, [("/a", "u3", 40)])
    v2_query = structured_streaming(spark_session, kafka_bootstrap, topic, checkpoint, v2=True)
    with pytest.raises(StreamingQueryException) as refused:
        v2_query.awaitTermination(120)
    message = str(refused.value)
    print("Structured Streaming, restarted with v2:", message.splitlines()[0][:400])
    assert "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]" in message

    # Sluice: the same records, v1 then v2 over v1's state.
    def declared(body: Mapping[str, Any]) -> States:
        return prepared(cassandra, cassandra_contact, cassandra_keyspace, body)

    v1 = sluice_batch(spark_session, kafka_bootstrap, topic, declared(V1), 100, (0, 3))
    assert v1 == {"/a": (2,), "/b": (1,)}
    v2 = sluice_batch(spark_session, kafka_bootstrap, topic, declared(V2), 200, (3, 4))
    assert v2 == {"/a": (3, 40)}, "v1's row read with last_ts null; the count goes on"
    produce(kafka_bootstrap, topic, [("/a", "u4", 50), ("/b", "u2", 60)])
    v2_again = sluice_batch(spark_session, kafka_bootstrap, topic, declared(V2), 300, (4, 6))
    assert v2_again == {"/a": (4, 50), "/b": (2, 60)}
