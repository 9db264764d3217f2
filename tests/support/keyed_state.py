"""Keyed state as a driver prepares it at start (``sluice_job.state.table.prepare``),
for tests that run a stateful transform's batches on the test session's Spark and
Cassandra: the tables ensured, read and written through the stack's node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice_api.event_time import EventTime
from sluice_api.state import State
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.state import States
from sluice_job.state import table as state_table


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
