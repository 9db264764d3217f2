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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sluice_job.state.access import WINDOW_BUCKET, WINDOW_KEY, forget_windows, write_arrow
from sluice_job.state.handle import KeyedState
from sluice_job.state.schema import OPEN_WINDOWS_BUCKETS

WRITTEN_SCHEMA = T.StructType([T.StructField("written", T.LongType(), nullable=False)])


def write(state: KeyedState, rows: DataFrame, write_version: int) -> int:
    """Write ``rows`` (conformed) as ``state``'s new rows for batch ``state.version``;
    returns the keys written. A window state's open windows go to the open-windows
    index too, and the windows the committed watermark closed leave it."""
    window = state.target.schema.window
    if window is not None:
        rows = with_window_key(rows, state.target.schema.window_key)
    by_key = rows.repartition(*(F.col(k) for k in state.key))
    task = partial(write_arrow, state.target, rows.columns, state.version, write_version)
    total = by_key.mapInArrow(task, WRITTEN_SCHEMA).agg(F.sum("written")).head()
    if window is not None and state.watermark_ms is not None:
        closed = state.watermark_ms - window.size_seconds * 1000
        forget_windows(state.target, closed, write_version)
    return int(total[0] or 0) if total is not None else 0


def with_window_key(rows: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """``rows`` with their open-windows index key (JSON of the key but the window's
    start) and bucket."""
    as_json = F.to_json(F.struct(*(F.col(k) for k in key))) if key else F.lit("{}")
    keyed = rows.withColumn(WINDOW_KEY, as_json)
    bucket = F.pmod(F.xxhash64(F.col(WINDOW_KEY)), F.lit(OPEN_WINDOWS_BUCKETS)).cast("int")
    return keyed.withColumn(WINDOW_BUCKET, bucket)
