"""Event-time windows on keyed state: each window's result written once, when final.

A window state (``spec.transform.state[].window``) keeps one row per key and window
while the window is open. A transform assigns its on-time events to windows
(:func:`assign`), aggregates them per key and window into this batch's partial
rows, and calls :func:`close`, which

* merges the partial rows into the windows' stored state (per value column, a
  :data:`Merge`: ``SUM``, ``UNION`` of sets, ``MIN``, ``MAX``, ``LAST``),
* computes this batch's watermark (the one committed before it, moved by the batch's
  newest on-time event minus the allowed lateness, as the driver will commit it),
* and parts the windows: those whose end the watermark has passed are **final**
  (the ones this batch touched, and those it did not, found in the open-windows
  index by their start), the others stay open.

``Closed.final`` holds each final window's key and values once: the transform makes
its output from it. ``Closed.state`` is the new state: the open windows' rows, and
the deletion of the final ones. A record for a window already final is behind the
watermark, so ``event_time.split`` has set it apart as late: a window is never
reopened. A batch run again after a crash reads the same state, index and
watermark and closes the same windows.

Cost per batch, beside the lookups and writes of the touched windows: one read of
each of the index's 16 partitions for the windows that start in the span the
watermark moved over, one lookup per untouched window that closes, and the deletion
of the index rows of windows closed before the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sluice_api.state import DELETED_COLUMN
from sluice_job import event_time
from sluice_job.state.access import WINDOW_KEY, open_windows_arrow
from sluice_job.state.handle import KeyedState
from sluice_job.state.schema import OPEN_WINDOWS_BUCKETS, Window

Merge = Callable[[Column, Column], Column]
"""How a value column's stored value (``None`` for a new window) and this batch's
partial value combine."""


def SUM(stored: Column, new: Column) -> Column:  # noqa: N802 (a constant of the API)
    """Added (a new window's stored value counts as 0)."""
    return F.coalesce(stored, F.lit(0)) + F.coalesce(new, F.lit(0))


def UNION(stored: Column, new: Column) -> Column:  # noqa: N802
    """The distinct elements of both (a set column, as an array)."""
    both = F.concat(F.coalesce(stored, F.array()), F.coalesce(new, F.array()))
    return F.array_distinct(both)


def MIN(stored: Column, new: Column) -> Column:  # noqa: N802
    return F.least(stored, new)


def MAX(stored: Column, new: Column) -> Column:  # noqa: N802
    return F.greatest(stored, new)


def LAST(stored: Column, new: Column) -> Column:  # noqa: N802
    """This batch's value, or the stored one where it has none."""
    return F.coalesce(new, stored)


WATERMARK: Final = "sluice_watermark_ms"


class WindowError(ValueError):
    """Windows used on a state that declares none, or without event time."""


@dataclass(frozen=True)
class Closed:
    """A batch's windows after :func:`close`."""

    final: DataFrame
    """The windows final in this batch: key (with the window's start) and values."""
    state: DataFrame
    """For ``TransformResult.state``: the open windows, and the final ones deleted."""


def assign(events: DataFrame, time: str, state: KeyedState) -> DataFrame:
    """``events`` with the state's window start column: each event once per window
    it is in (one for tumbling windows, ``size / slide`` for sliding ones)."""
    window = _window(state)
    seconds = F.unix_seconds(F.col(time).cast("timestamp"))
    slide = F.lit(window.slide_seconds)
    last = seconds - F.pmod(seconds, slide)
    first = last - F.lit(window.size_seconds - window.slide_seconds)
    starts = F.transform(F.sequence(first, last, slide), F.timestamp_seconds)
    return events.withColumn(window.start, F.explode(starts))


def close(
    partial_rows: DataFrame,
    state: KeyedState,
    times: DataFrame,
    merge: Mapping[str, Merge],
) -> Closed:
    """Merge this batch's ``partial_rows`` (the state's key columns and value columns,
    one row per key and window) into the stored windows and part them by this
    batch's watermark, computed from ``times`` (``event_time.split(...).times``).
    A value column without a ``merge`` takes the batch's value (``LAST``)."""
    window = _window(state)
    key, values = list(state.key), list(state.columns)
    unknown = sorted(set(merge) - set(values))
    if unknown:
        raise WindowError(f"state {state.name!r}: merge names column(s) {unknown} it lacks")
    clock = watermark(times, state)
    stored = state.lookup(partial_rows).select(
        *key, *(F.col(v).alias(f"stored_{v}") for v in values)
    )
    given = partial_rows.select(
        *key, *(F.col(v) if v in partial_rows.columns else F.lit(None).alias(v) for v in values)
    )
    merged = given.join(stored, key, "left").select(
        *key,
        *(merge.get(v, LAST)(F.col(f"stored_{v}"), F.col(v)).alias(v) for v in values),
    )
    size_ms = window.size_seconds * 1000
    end = F.unix_millis(F.col(window.start)) + F.lit(size_ms)
    parted = merged.crossJoin(clock).withColumn(
        "sluice_final", F.coalesce(end <= F.col(WATERMARK), F.lit(False))
    )
    touched_final = parted.where(F.col("sluice_final")).select(*key, *values)
    still_open = parted.where(~F.col("sluice_final")).select(*key, *values)
    closing = closing_keys(clock, state)
    untouched = closing.join(partial_rows.select(*key), key, "left_anti")
    final = touched_final.unionByName(state.lookup(untouched).select(*key, *values))
    deleted = final.select(*key, F.lit(True).alias(DELETED_COLUMN))
    new_state = still_open.withColumn(DELETED_COLUMN, F.lit(False)).unionByName(
        deleted, allowMissingColumns=True
    )
    return Closed(final, new_state)


def _window(state: KeyedState) -> Window:
    window = state.target.schema.window
    if window is None:
        raise WindowError(
            f"state {state.name!r} declares no window: set spec.transform.state[].window"
        )
    return window


def watermark(times: DataFrame, state: KeyedState) -> DataFrame:
    """One row: this batch's watermark (ms; null while no event time was seen), as
    ``sluice_api.event_time.advance`` will move it with the commit."""
    times, newest = event_time.newest_on_time(times)
    moved = newest - F.lit(state.lateness_seconds * 1000)
    before = F.lit(state.watermark_ms).cast("long")
    if state.watermark_ms is None:
        return times.agg(moved.alias(WATERMARK))
    return times.agg(F.greatest(before, F.coalesce(moved, before)).alias(WATERMARK))


def closing_keys(clock: DataFrame, state: KeyedState) -> DataFrame:
    """The keys of the index's windows (with the window's start) or sessions whose
    time came in ``(committed watermark, this batch's]``: final now (a session's
    entry may be stale: the key's sessions are looked up to see)."""
    schema = state.target.schema
    spark = clock.sparkSession
    if state.stored is not None:  # sluice_job.testing: no index; only touched keys close
        return spark.createDataFrame([], schema.spark_types(state.key))
    lag = schema.index_lag_ms
    after = None if state.watermark_ms is None else schema.closed_before(state.watermark_ms)
    span = (
        spark.range(OPEN_WINDOWS_BUCKETS)
        .select(F.col("id").cast("int").alias("bucket"))
        .crossJoin(
            clock.select(
                F.lit(after).cast("long").alias("after"),
                (F.col(WATERMARK) - F.lit(lag)).alias("until"),
            )
        )
    )
    found_schema = T.StructType(
        [
            T.StructField("window_start", T.TimestampType()),
            T.StructField(WINDOW_KEY, T.StringType()),
        ]
    )
    found = span.mapInArrow(partial(open_windows_arrow, state.target, state.tally), found_schema)
    rest = schema.spark_types(schema.window_key)
    parsed = found.select("window_start", F.from_json(F.col(WINDOW_KEY), rest).alias("k"))
    keys = [F.col(f"k.{n}").alias(n) for n in schema.window_key]
    if schema.window is not None:
        keys.append(F.col("window_start").alias(schema.window.start))
    return parsed.select(*keys).select(*state.key).dropDuplicates()
