"""One row per key without a shuffle when a batch is one task (docs/tuning.md, "What a
small batch could shed"): a single partition is clustered by any key, so Spark plans
``keys.last_per_key`` with no ``Exchange`` and keeps exactly the rows the shuffled
ranking keeps. The lever a small batch would use rests on both halves of this.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job import keys

pytestmark = pytest.mark.integration


def records(spark: Any) -> DataFrame:
    """400 records on 8 partitions, 50 keys each seen in several partitions, so the
    winner of a key is decided across partitions."""
    frame: DataFrame = spark.range(0, 400, 1, 8)
    return frame.select(
        (F.col("id") % 50).cast("string").alias("event_id"),
        F.struct(
            (F.col("id") % 8).cast("int").alias("partition"), F.col("id").alias("offset")
        ).alias(keys.POSITION),
        F.col("id").alias("seq"),
    )


def shuffles(frame: DataFrame) -> bool:
    return "Exchange" in frame._jdf.queryExecution().executedPlan().toString()


def winners(frame: DataFrame) -> dict[str, int]:
    return {row.event_id: row.seq for row in frame.collect()}


def test_one_task_ranks_keys_without_a_shuffle_and_keeps_the_same_rows(
    spark_session: Any,
) -> None:
    spread = records(spark_session)
    shuffled = keys.last_per_key(spread, ["event_id"])
    single = keys.last_per_key(spread.coalesce(1), ["event_id"])
    assert shuffles(shuffled)
    assert not shuffles(single)
    expected = winners(shuffled)
    assert len(expected) == 50
    assert winners(single) == expected
