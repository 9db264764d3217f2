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

from sluice_job.state.access import write_arrow
from sluice_job.state.handle import KeyedState

WRITTEN_SCHEMA = T.StructType([T.StructField("written", T.LongType(), nullable=False)])


def write(state: KeyedState, rows: DataFrame, write_version: int) -> int:
    """Write ``rows`` (conformed) as ``state``'s new rows for batch ``state.version``;
    returns the keys written."""
    by_key = rows.repartition(*(F.col(k) for k in state.key))
    task = partial(write_arrow, state.target, rows.columns, state.version, write_version)
    total = by_key.mapInArrow(task, WRITTEN_SCHEMA).agg(F.sum("written")).head()
    return int(total[0] or 0) if total is not None else 0
