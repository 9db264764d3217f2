"""Example stateful transform: the KPI example's rows (``kpi``), counting each event
once even when its producer sent it again, minutes or hours later.

A producer that retries after a timeout, or a service that replays its outbox, sends
an event twice with the same ``event_id`` and two Kafka offsets. The KPI example
counts both. This one keeps, as keyed state (``spec.transform.state``, docs/
stateful.md), the ids it has counted, for a horizon (the state's ``ttlSeconds``):
each batch looks up the ids it holds, counts the ones not seen before (and, of ids
repeated inside the batch, one), and records them. Declared as::

    state:
      - name: seen
        table: seen_events
        key: [{name: event_id, type: text}]
        ttlSeconds: 86400          # the horizon: a re-send a day later counts again

Version 2 (:func:`transform_v2`) also records the batch that first counted an id
(``columns: [{name: first_batch, type: bigint}]``): an upgrade that adds a field to
the state, which reads null in the ids version 1 recorded. Options: ``windowSeconds``
(as ``kpi``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job.examples.kpi import kpis, window_seconds
from sluice_job.examples.ui_events import clean
from sluice_job.state import States
from sluice_job.transform import TransformResult

STATE = "seen"


def transform(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _deduplicated(records, options, state, first_batch=False)


def transform_v2(records: DataFrame, options: Mapping[str, Any], state: States) -> TransformResult:
    return _deduplicated(records, options, state, first_batch=True)


def _deduplicated(
    records: DataFrame, options: Mapping[str, Any], state: States, *, first_batch: bool
) -> TransformResult:
    cleaned = clean(records)
    first = first_of_each_id(cleaned.output)
    seen = state[STATE].lookup(first)
    fresh = first.join(seen.select("event_id"), "event_id", "left_anti")
    recorded = fresh.select("event_id", *([F.col("batch_id").alias("first_batch")] * first_batch))
    return TransformResult(
        kpis(fresh, window_seconds(options)), cleaned.rejects, state={STATE: recorded}
    )


def first_of_each_id(events: DataFrame) -> DataFrame:
    """One event per ``event_id``: its first in the batch by source position (a
    re-sent event carries the same fields, so which one only matters for where it
    came from). ``min`` of a struct, so that Spark knows the choice is deterministic."""
    order = ["source_partition", "source_offset"]
    rest = [c for c in events.columns if c != "event_id" and c not in order]
    first = events.groupBy("event_id").agg(F.min(F.struct(*order, *rest)).alias("first"))
    return first.select("event_id", *(F.col(f"first.{c}").alias(c) for c in (*order, *rest)))
