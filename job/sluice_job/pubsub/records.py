"""A Pub/Sub batch as the transform sees it: the Kafka source's columns, and more.

A transform written for Kafka runs unchanged on Pub/Sub: the frame has the Kafka
source's columns, filled from the message (``value``: its data; ``key``: its
ordering key, or null; ``topic``: the subscription id; ``partition``: 0;
``offset``: its sequence number in the pipeline, ``pubsub.messages``; ``timestamp``:
its publish time; ``headers``: its attributes), plus ``message_id`` and
``attributes`` (a map) for transforms that want them, ``batch_id`` and the source
position (``keys.POSITION``), as the Kafka reader adds them.

The messages are in the driver already (pulled, or read back from the spool), so
the frame is made from them there, as an Arrow table, and Spark ships its slices to
the tasks.

A reject's dead letter names its message: ``sluice.pubsub.message.id`` and the
message's attributes as ``sluice.pubsub.attribute.<name>`` headers, cut to
:data:`ATTRIBUTES_BUDGET` bytes (with ``sluice.pubsub.attributes.truncated``) so the
letter still fits the dead-letter topic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    MapType,
    StringType,
    StructField,
    StructType,
)

from sluice_job import keys
from sluice_job.checkpoint_rows import Batch
from sluice_job.deadletter import Reject
from sluice_job.pubsub.messages import Message
from sluice_job.reader import BATCH_ID_COLUMN, KAFKA_RECORD

MESSAGE_ID: Final = "message_id"
ATTRIBUTES: Final = "attributes"
ID_HEADER: Final = "sluice.pubsub.message.id"
ATTRIBUTE_HEADER: Final = "sluice.pubsub.attribute."
TRUNCATED_HEADER: Final = "sluice.pubsub.attributes.truncated"
ATTRIBUTES_BUDGET: Final = 512
"""Bytes of attribute names and values a dead letter carries as headers."""

SCHEMA: Final = StructType(
    [
        *KAFKA_RECORD.fields,
        StructField(MESSAGE_ID, StringType()),
        StructField(ATTRIBUTES, MapType(StringType(), StringType())),
    ]
)
"""The Kafka source's columns, then the message's id and attributes."""


@dataclass
class PubSubRecords:
    """The records of the batch the runner holds (``hold``), as a Spark frame."""

    spark: SparkSession
    subscription: str
    _batch: Batch | None = None
    _messages: tuple[Message, ...] = ()
    _by_offset: dict[int, Message] = field(default_factory=dict)

    def hold(self, batch: Batch, messages: Sequence[Message]) -> None:
        start = batch.ranges[0].start
        self._batch, self._messages = batch, tuple(messages)
        self._by_offset = {start + i: m for i, m in enumerate(messages)}

    def frame(self, batch: Batch) -> DataFrame:
        if self._batch is None or self._batch.batch_id != batch.batch_id:
            raise RuntimeError(f"batch {batch.batch_id}: its messages are not held")
        frame = self.spark.createDataFrame(table(self._by_offset, self.subscription))
        frame = frame.withColumn(BATCH_ID_COLUMN, F.lit(batch.batch_id).cast("long"))
        return frame.withColumn(keys.POSITION, keys.position())

    def describe(self, reject: Reject) -> Reject:
        message = self._by_offset.get(reject.offset)
        if message is None:
            return reject
        return replace(reject, extra=letter_headers(message))


def table(by_offset: Mapping[int, Message], subscription: str) -> pa.Table:
    """The messages as an Arrow table of :data:`SCHEMA`: Spark takes it into the JVM
    as it is (no Python worker unpickles rows), several times faster than rows."""
    messages = list(by_offset.values())
    count = len(messages)
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.table(
        {
            "key": pa.array([m.ordering_key.encode() or None for m in messages], pa.binary()),
            "value": pa.array([m.data for m in messages], pa.binary()),
            "topic": pa.array([subscription] * count, pa.string()),
            "partition": pa.array([0] * count, pa.int32()),
            "offset": pa.array(list(by_offset), pa.int64()),
            "timestamp": pa.array([m.publish_time for m in messages], pa.timestamp("us", "UTC")),
            "timestampType": pa.array([0] * count, pa.int32()),
            "headers": pa.array(
                [
                    [{"key": k, "value": v.encode()} for k, v in sorted(m.attributes.items())]
                    for m in messages
                ],
                pa.list_(header),
            ),
            "message_id": pa.array([m.message_id for m in messages], pa.string()),
            "attributes": pa.array(
                [sorted(m.attributes.items()) for m in messages], pa.map_(pa.string(), pa.string())
            ),
        }
    )


def letter_headers(message: Message) -> tuple[tuple[str, str], ...]:
    """The headers naming ``message`` in its dead letter (a pure function)."""
    headers = [(ID_HEADER, message.message_id)]
    used = 0
    for name, value in sorted(message.attributes.items()):
        size = len(name.encode()) + len(value.encode())
        if used + size > ATTRIBUTES_BUDGET:
            headers.append((TRUNCATED_HEADER, "true"))
            break
        headers.append((ATTRIBUTE_HEADER + name, value))
        used += size
    return tuple(headers)
