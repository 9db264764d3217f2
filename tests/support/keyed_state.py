"""Keyed state as a driver prepares it at start (``sluice_job.state.table.prepare``),
for tests that run a stateful transform's batches on the test session's Spark and
Cassandra: the tables ensured, read and written through the stack's node."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession

from sluice_api.event_time import EventTime, advance
from sluice_api.state import State
from sluice_job import event_time, transform
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.state import States
from sluice_job.state import table as state_table
from sluice_job.state import write as state_write
from sluice_job.transform import TransformResult
from sluice_job.write_order import write_version

Transform = Callable[[DataFrame, Mapping[str, Any], States], TransformResult]


def prepared(
    session: Any,
    contact: str,
    keyspace: str,
    *declared: Mapping[str, Any],
    event_time: EventTime | None = None,
    owner: str = "tests/state",
) -> States:
    """The states of ``declared`` (as in ``spec.transform.state``) in ``keyspace``."""
    connection = CassandraTarget((contact,), keyspace, "", None)
    states = [State.model_validate(body) for body in declared]
    return state_table.prepare(session, connection, states, event_time, owner)


@dataclass
class Batches:
    """A stateful transform's batches run in order as the driver runs them: each at
    its version and the watermark committed before it, its state written, and (when
    committed) the watermark moved by its event times."""

    spark: SparkSession
    states: States
    transform: Transform
    lateness_seconds: int
    watermark: int | None = None

    def run(self, version: int, records: DataFrame, *, commit: bool = True) -> list[Row]:
        """The batch's output rows; ``commit=False``: a first attempt that crashed
        after its writes (the watermark stays)."""
        batch = self.states.at(version, self.watermark)
        result = transform.apply(self.transform, records, {}, batch)
        out = result.output.collect()
        for name, frame in result.state.items():
            state_write.write(batch[name], frame, write_version(version, 1))
        assert result.event_time is not None
        newest, _ = event_time.newest_and_late(result.event_time)
        if commit:
            self.watermark = advance(self.watermark, newest, self.lateness_seconds)
        return out
