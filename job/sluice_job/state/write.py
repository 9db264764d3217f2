"""The driver's side of writing a batch's new state: one Spark job per state.

The rows a transform gave for a state (``KeyedState.conform``) are partitioned by
key, so every row of one key reaches one task (a key given twice is refused there,
not silently reduced), and each task writes its keys (``access.write_arrow``) with
the batch's version and the write version of this driver's epoch. The job runs
beside the sink's write, before the commit: a batch whose state write failed is not
committed, and its re-run reads the state from before it.
"""

from __future__ import annotations

from functools import partial

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sluice_api.state import SESSIONS_COLUMN
from sluice_job.state.access import (
    WINDOW_AT,
    WINDOW_BUCKET,
    WINDOW_KEY,
    forget_windows,
    write_arrow,
)
from sluice_job.state.handle import KeyedState
from sluice_job.state.schema import OPEN_WINDOWS_BUCKETS

WRITTEN_SCHEMA = T.StructType([T.StructField("written", T.LongType(), nullable=False)])


def write(state: KeyedState, rows: DataFrame, write_version: int) -> int:
    """Write ``rows`` (conformed) as ``state``'s new rows for batch ``state.version``;
    returns the keys written. A window state's open windows go to the open-windows
    index too, and the windows the committed watermark closed leave it."""
    schema = state.target.schema
    if schema.indexed:
        rows = with_window_key(rows, schema.window_key).withColumn(WINDOW_AT, _index_time(state))
    by_key = rows.repartition(*(F.col(k) for k in state.key))
    task = partial(
        write_arrow, state.target, rows.columns, state.version, write_version, state.tally
    )
    total = by_key.mapInArrow(task, WRITTEN_SCHEMA).agg(F.sum("written")).head()
    if schema.indexed and state.watermark_ms is not None:
        forget_windows(state.target, schema.closed_before(state.watermark_ms), write_version)
    return int(total[0] or 0) if total is not None else 0


def _index_time(state: KeyedState) -> Column:
    """When a row's entry of the open-windows index is due: a window's start, or the
    earliest expiry (last event plus the gap) of a key's open sessions."""
    schema = state.target.schema
    if schema.window is not None:
        return F.col(schema.window.start)
    assert schema.session is not None
    ends = F.map_values(F.col(SESSIONS_COLUMN))
    due = F.unix_millis(F.array_min(ends)) + F.lit(schema.session.gap_seconds * 1000)
    return F.timestamp_millis(due)


def with_window_key(rows: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """``rows`` with their open-windows index key (JSON of the key but the window's
    start) and bucket."""
    as_json = F.to_json(F.struct(*(F.col(k) for k in key))) if key else F.lit("{}")
    keyed = rows.withColumn(WINDOW_KEY, as_json)
    bucket = F.pmod(F.xxhash64(F.col(WINDOW_KEY)), F.lit(OPEN_WINDOWS_BUCKETS)).cast("int")
    return keyed.withColumn(WINDOW_BUCKET, bucket)
