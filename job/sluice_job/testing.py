"""Testing a transform without servers: sample records in, output rows and rejects out.

A user's tests (plain pytest, no Kafka, no Cassandra) call :func:`run` with a few
records written as dicts or JSON lines; they get the rows their transform would hand
to the sink and the records it would send to the dead-letter topic with their
reasons. The records have exactly the columns the driver gives a transform (Kafka's,
``batch_id`` and ``_sluice_position``), and the transform's answer goes through the
same checks as in the driver (``transform.apply``: the rejects' shape, the refusal of
a non-deterministic split), so a transform that passes here runs the same there.
Given the Cassandra sink's table (``sink_table``: its ``CREATE TABLE`` statement,
the ``.cql`` file holding it, or a :class:`CqlTable`), the output is also checked
against the table's columns, primary key and CQL types, which the driver would
otherwise find only when a batch writes, failing it (``cql_table``).

    from sluice_job import testing

    def test_a_malformed_event_is_rejected_with_its_reason():
        result = testing.run("my_pipeline.transform:transform", [{"value": "not json"}])
        assert result.output == []
        assert [r["reason"] for r in result.rejects] == ["malformed JSON"]

    def test_the_output_fits_the_sink_table():
        sample = testing.read_jsonl("tests/sample.jsonl")
        testing.run("my_pipeline.transform:transform", sample, sink_table=Path("schema.cql"))

A stateful transform (docs/stateful.md) is run with its declarations (``state``, as
in ``spec.transform.state``) and the rows its state holds before the batch
(``stored``); the result carries the new state it gave. With ``event_time`` (as in
``spec.transform.eventTime``) the batch is measured against ``watermark``; a window
state's windows close here only if the batch touches them (the index of open
windows is a table the harness does not have):

    SEEN = {"name": "seen", "table": "seen", "key": [{"name": "event_id", "type": "text"}]}

    def test_an_id_seen_before_is_not_counted_again():
        result = testing.run(
            "my_pipeline.dedup:transform", sample, state=[SEEN],
            stored={"seen": [{"event_id": "e-1"}]},
        )
        assert [r["event_id"] for r in result.state["seen"]] == ["e-2"]
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sluice_api.event_time import EventTime
from sluice_api.state import State
from sluice_job import keys, transform
from sluice_job.cql_table import CqlSchemaError, CqlTable, parse, problems
from sluice_job.reader import BATCH_ID_COLUMN, KAFKA_RECORD
from sluice_job.sinks import SinkSchemaError
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.state import States
from sluice_job.state.access import DuplicateStateError, StateTarget
from sluice_job.state.schema import StateSchema

SinkTable = CqlTable | str | os.PathLike[str]
"""A sink table as :func:`run` takes it: CQL text with its ``CREATE TABLE`` statement
(a whole ``schema.cql``), the path of a ``.cql`` file, or a :class:`CqlTable`."""

EPOCH_START = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Result:
    """What the transform gave for the sample records, as plain dicts."""

    output: list[dict[str, Any]]
    """The rows for the sink (without ``_sluice_position``)."""
    rejects: list[dict[str, Any]]
    """The records refused, each with ``key``, ``value``, ``topic``, ``partition``,
    ``offset`` and ``reason``."""
    schema: StructType | None = None
    """The output's Spark schema (without ``_sluice_position``), for
    :func:`check_sink_table`."""
    state: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The new state per declared state name, as the driver would write it."""


def session() -> SparkSession:
    """A small local SparkSession for tests (one core, no UI, loopback only); its
    Python workers run this interpreter, so they import the code under test."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master("local[1]")
        .appName("sluice-transform-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def run(
    entrypoint: str | transform.TransformFn,
    records: Iterable[Mapping[str, Any] | str | bytes],
    options: Mapping[str, Any] | None = None,
    *,
    topic: str = "test",
    batch_id: int = 1,
    spark: SparkSession | None = None,
    sink_table: SinkTable | None = None,
    state: Sequence[Mapping[str, Any]] = (),
    stored: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    event_time: Mapping[str, Any] | None = None,
    watermark: datetime | None = None,
) -> Result:
    """Run the transform (``module:function``, as in ``spec.transform.entrypoint``, or
    the function) on ``records`` and collect its output and rejects.

    A record is a dict with any of ``key``, ``value``, ``topic``, ``partition``,
    ``offset``, ``timestamp`` (a datetime), ``headers`` (a dict); a ``value`` or
    ``key`` that is a dict or list is JSON-encoded, a str UTF-8-encoded. A record
    given as a str or bytes is its value. Missing fields are filled in: the topic,
    partition 0 and offsets counting up from 0 in the order given.

    ``sink_table`` (a ``CREATE TABLE`` statement, a ``.cql`` file or a
    :class:`CqlTable`): the output is checked against the Cassandra sink's table as
    by :func:`check_sink_table`, which raises ``SinkSchemaError`` naming every
    mismatch.

    ``state``: the declarations of ``spec.transform.state`` (camelCase dicts, as in the
    manifest); ``stored``: per state, the rows (dicts of key and value columns) its
    lookups find. ``event_time``: ``spec.transform.eventTime``; ``watermark``: the
    watermark committed before the batch (``None``: none yet)."""
    table = None if sink_table is None else cql_table(sink_table)
    stateful = bool(state) or event_time is not None
    if isinstance(entrypoint, str):
        function = transform.load(entrypoint, stateful=stateful)
    else:
        function = entrypoint
    spark = spark or session()
    states = _states(spark, state, stored or {}, event_time, watermark) if stateful else None
    rows = [_row(record, topic, offset) for offset, record in enumerate(records)]
    frame = spark.createDataFrame(rows, KAFKA_RECORD)
    frame = frame.withColumn(BATCH_ID_COLUMN, F.lit(batch_id).cast("long")).withColumn(
        keys.POSITION, keys.position()
    )
    result = transform.apply(function, frame, options or {}, states)
    schema = StructType([f for f in result.output.schema.fields if f.name != keys.POSITION])
    output = [
        {k: v for k, v in row.asDict(recursive=True).items() if k != keys.POSITION}
        for row in result.output.collect()
    ]
    rejects = [row.asDict() for row in result.rejects.collect()] if result.rejects else []
    if table is not None:
        check_sink_table(schema, table, output)
    new_state = {name: _once_per_key(states, name, rows) for name, rows in result.state.items()}
    return Result(output, rejects, schema, new_state)


def _states(
    spark: SparkSession,
    declared: Sequence[Mapping[str, Any]],
    stored: Mapping[str, Sequence[Mapping[str, Any]]],
    event_time: Mapping[str, Any] | None,
    watermark: datetime | None,
) -> States:
    """The batch's states as the driver makes them, looked up in ``stored``."""
    nowhere = CassandraTarget(("localhost",), "testing", "", None)
    schemas = [StateSchema.of(State.model_validate(body), "testing") for body in declared]
    unknown = sorted(set(stored) - {s.name for s in schemas})
    if unknown:
        raise ValueError(f"stored names state(s) {unknown} that state does not declare")
    frames = {
        s.name: spark.createDataFrame(
            [
                tuple(row.get(f.name) for f in s.spark_schema().fields)
                for row in stored.get(s.name, ())
            ],
            s.spark_schema(),
        )
        for s in schemas
    }
    clock = EventTime.model_validate(event_time) if event_time is not None else None
    ms = None if watermark is None else int(watermark.timestamp() * 1000)
    return States(tuple(StateTarget(nowhere, s) for s in schemas), 1, clock, ms, stored=frames)


def _once_per_key(states: States | None, name: str, rows: DataFrame) -> list[dict[str, Any]]:
    """The new rows of state ``name``, refused as the driver refuses them if a key
    has two (``DuplicateStateError``)."""
    if states is None:
        return []
    key = states[name].key
    found = [row.asDict(recursive=True) for row in rows.collect()]
    keys = [tuple(row[k] for k in key) for row in found]
    twice = sorted({k for k in keys if keys.count(k) > 1}, key=repr)
    if twice:
        raise DuplicateStateError(
            f"state {name!r}: the transform gave key(s) {twice} two new states in one batch"
        )
    return found


def cql_table(source: SinkTable, table: str | None = None) -> CqlTable:
    """The sink table from its ``CREATE TABLE`` statement: ``source`` is CQL text (a
    str with a parenthesis) or the path of a ``.cql`` file; when it creates several
    tables, ``table`` (``keyspace.table`` or ``table``) names the sink's."""
    if isinstance(source, CqlTable):
        return source
    if isinstance(source, str) and "(" in source:
        return parse(source, table)
    path = Path(source)
    if not path.is_file():
        raise CqlSchemaError(
            f"sink_table {str(source)!r} is neither a CREATE TABLE statement nor a file"
        )
    return parse(path.read_text(), table)


def check_sink_table(
    schema: StructType, table: SinkTable, rows: Iterable[Mapping[str, Any]] = ()
) -> None:
    """Raise ``SinkSchemaError`` if an output of ``schema`` (``Result.schema``) would
    fail against the Cassandra sink's ``table``, naming every problem: output columns
    the table lacks, primary-key columns the output lacks, Spark types the column's
    CQL type does not take (with the cast that fixes each), and ``rows`` (the output's,
    as :func:`run` collects them) with a null primary-key column."""
    sink = cql_table(table)
    found = problems(sink, schema)
    present = [c for c in sink.primary_key if c in schema.names]
    for number, row in enumerate(rows):
        nulls = [c for c in present if row.get(c) is None]
        if nulls:
            found.append(f"output row {number} has a null primary key column {nulls}: {row}")
    if found:
        raise SinkSchemaError(
            f"the output does not fit the sink table {sink.name}:\n- " + "\n- ".join(found)
        )


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Sample records from a JSON-lines file: each line one record (see :func:`run`)."""
    lines = Path(path).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _row(record: Mapping[str, Any] | str | bytes, topic: str, offset: int) -> tuple[Any, ...]:
    fields: Mapping[str, Any] = {"value": record} if isinstance(record, (str, bytes)) else record
    headers = fields.get("headers") or {}
    return (
        _bytes(fields.get("key")),
        _bytes(fields.get("value")),
        str(fields.get("topic", topic)),
        int(fields.get("partition", 0)),
        int(fields.get("offset", offset)),
        fields.get("timestamp", EPOCH_START),
        0,
        [(str(k), _bytes(v)) for k, v in dict(headers).items()],
    )


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


__all__ = [
    "KAFKA_RECORD",
    "CqlSchemaError",
    "CqlTable",
    "Result",
    "SinkSchemaError",
    "check_sink_table",
    "cql_table",
    "read_jsonl",
    "run",
    "session",
]
