"""What a batch's state requests cost, counted where they run.

A state's lookups and writes run in the Python workers inside the batch's Spark
jobs (``access``), so the driver cannot time them around a call. Each task adds
what its requests took to a Spark accumulator (:func:`tally`); Spark merges the
tasks' additions into the driver's value when each task completes, and the
executor takes the difference across a batch (``execute.SparkExecutor``): the
``state_*`` fields of the batch's log line and ``sluice_state_seconds``.

Seconds are summed over the batch's tasks, which run side by side (as many at once
as the driver has cores): a batch whose two tasks each read for 0.3 s shows 0.6 s of
reads. They cover the requests alone (the round trips to Cassandra), not the Arrow
transfer or the transform's Spark work around them.
"""

from __future__ import annotations

from pyspark import SparkContext
from pyspark.accumulators import Accumulator, AccumulatorParam

from sluice_job.state_io import StateIO


class _Sum(AccumulatorParam[StateIO]):
    def zero(self, value: StateIO) -> StateIO:
        return StateIO()

    def addInPlace(self, value1: StateIO, value2: StateIO) -> StateIO:  # noqa: N802 (Spark's name)
        return value1 + value2


Tally = Accumulator[StateIO]


def tally(context: SparkContext) -> Tally:
    """A new accumulator of state requests, on ``context``'s driver."""
    return context.accumulator(StateIO(), _Sum())


def add(into: Tally | None, io: StateIO) -> None:
    """A task's requests, added to ``into`` (``None``: not counted, as in a standby's
    warm-up)."""
    if into is not None:
        into.add(io)
