"""Writes ordered by a column of the output: the latest state of a key by event time.

Without ``spec.sink.orderColumn`` every row of a batch carries the batch's write
version (``write_order``), so the later *batch* wins: an older event that arrives
late, in a later batch, overwrites the newer state of its key. With it, each row
carries its own version, made from its order value (a timestamp, or an integer of
milliseconds) exactly as a batch's is made from its plan time:
``order_ms * EPOCH_SLOTS + epoch slot``. So a stored row is replaced only by a row
whose order value is not older, whatever the order the batches ran in, replays and
resets included; within one millisecond the newer driver's write wins, as for batch
versions.

The version is computed by Spark next to the output (:data:`VERSION`), and a row
without a usable order value (null, before 1970, past what a cell timestamp holds)
fails the batch with a message naming the column: such a row cannot be ordered, and
writing it with any other version would let it overwrite newer state. A transform
rejects those records (to the dead-letter topic) before they reach the sink.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    TimestampType,
)

from sluice_job.sinks import SinkSchemaError
from sluice_job.write_order import EPOCH_SLOTS, MAX_ORDER_MS, epoch_slot

VERSION: Final = "_sluice_version"
"""Column holding each row's write version when the writes are ordered."""
_INTEGERS: Final = (ByteType, ShortType, IntegerType, LongType)


def versioned(frame: DataFrame, column: str, write_version: int) -> DataFrame:
    """``frame`` with :data:`VERSION`: each row's version from its ``column`` and the
    epoch of ``write_version`` (the batch's, ``write_order.write_version``). Raises
    :class:`SinkSchemaError` when the output has no such column or it is neither a
    timestamp nor an integer; a row whose value cannot be ordered fails the Spark
    job that writes it, naming the column."""
    if column not in frame.columns:
        raise SinkSchemaError(
            f"transform output has no column {column!r} (sink.orderColumn) to order its writes"
        )
    if VERSION in frame.columns:
        raise SinkSchemaError(f"column {VERSION!r} is reserved: the sink writes the version in it")
    millis = _millis(frame.schema[column].dataType, F.col(column), column)
    unusable = F.col(column).isNull() | (millis < 0) | (millis > MAX_ORDER_MS)
    message = (
        f"sink.orderColumn {column!r} is null, before 1970 or out of range in an output row; "
        "reject such records in the transform (they cannot be ordered)"
    )
    version = millis * EPOCH_SLOTS + epoch_slot(write_version)
    return frame.withColumn(
        VERSION, F.when(unusable, F.raise_error(F.lit(message))).otherwise(version)
    )


def _millis(kind: DataType, value: Column, column: str) -> Column:
    if isinstance(kind, TimestampType):
        return F.unix_millis(value)
    if isinstance(kind, _INTEGERS):
        return value.cast("long")
    raise SinkSchemaError(
        f"sink.orderColumn {column!r} is {kind.simpleString()}: it must be a timestamp "
        "or an integer (milliseconds since 1970)"
    )
