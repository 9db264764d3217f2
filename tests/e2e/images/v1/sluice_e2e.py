"""Code of the end-to-end job image ``v1``: the example's cleaned events, one row per
event, tagged ``v1``. Image ``v2`` has a module of the same name with other code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job.examples.ui_events import clean
from sluice_job.transform import TransformResult

VERSION = "v1"


def transform(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    del options
    cleaned = clean(records)
    output = cleaned.output.drop("batch_id").withColumn("tag", F.lit(VERSION))
    return cleaned.with_output(output)
