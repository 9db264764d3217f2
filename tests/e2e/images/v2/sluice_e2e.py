"""Code of the end-to-end job image ``v2``: like ``v1`` but tagged ``v2`` and with
the action upper-cased, so the rows it writes differ visibly from v1's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job.examples.ui_events import clean
from sluice_job.transform import TransformResult

VERSION = "v2"


def transform(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    del options
    cleaned = clean(records)
    output = (
        cleaned.output.drop("batch_id")
        .withColumn("action", F.upper(F.col("action")))
        .withColumn("tag", F.lit(VERSION))
    )
    return cleaned.with_output(output)
