"""Example transform for the Datastore sink: one ``UiEvent`` entity per valid event,
keyed by its ``event_id`` (the ``__key__`` column), with its source position.

Re-processing an event writes the same key with a newer write version, so the kind
holds each event once. Malformed records are returned as rejects for the dead-letter
topic. Used by ``examples/datastore-pipeline.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job.examples.ui_events import clean
from sluice_job.transform import TransformResult


def transform(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    del options
    cleaned = clean(records)
    entities = cleaned.output.drop("batch_id").withColumn("__key__", F.col("event_id"))
    return cleaned.with_output(entities)
