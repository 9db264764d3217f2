"""The pipeline's entrypoint, ``clickscore.transform:transform``: one scored row per
valid click event, and every other record rejected with its reason (it goes to the
pipeline's dead-letter topic).

Target table (``schema.cql``)::

    CREATE TABLE click_scores (event_id text PRIMARY KEY, user_id text, page text,
        action text, score int, event_time timestamp)

Options: ``weights``, the score of each action (default
:data:`clickscore.scoring.DEFAULT_WEIGHTS`); an action without a weight is rejected.

The rules run as a Python UDF, so Spark's Python workers unpickle a function of this
package: the package must be installed in the image the executors run, not only in
the driver's. The UDF is deterministic, as Sluice requires of the split between
output and rejects (docs/writing-a-transform.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from clickscore.scoring import DEFAULT_WEIGHTS, Verdict, judge
from sluice_job import keys
from sluice_job.transform import REJECT_COLUMNS, TransformResult

VERDICT = StructType(
    [
        StructField(name, LongType() if name in ("score", "ts") else StringType())
        for name in Verdict._fields
    ]
)
JUDGED = "_verdict"


def transform(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    weights = {**DEFAULT_WEIGHTS, **{str(k): int(v) for k, v in options.get("weights", {}).items()}}

    def verdict(value: bytes | None) -> Verdict:
        return judge(value, weights)

    # A row-at-a-time UDF (no Arrow): the verdict is a struct, one per record.
    udf = F.udf(verdict, VERDICT, useArrow=False)
    judged = records.withColumn(JUDGED, udf(F.col("value")))
    valid = F.col(f"{JUDGED}.reason").isNull()
    position = [keys.POSITION] if keys.POSITION in records.columns else []
    output = judged.where(valid).select(
        *(F.col(f"{JUDGED}.{name}").alias(name) for name in ("event_id", "user_id", "page")),
        F.col(f"{JUDGED}.action").alias("action"),
        F.col(f"{JUDGED}.score").cast("int").alias("score"),
        F.timestamp_millis(F.col(f"{JUDGED}.ts")).alias("event_time"),
        *position,  # of two events with one id in a batch, the later is written
    )
    source = [c for c in REJECT_COLUMNS if c != "reason"]
    rejects = judged.where(~valid).select(*source, F.col(f"{JUDGED}.reason").alias("reason"))
    return TransformResult(output, rejects)
