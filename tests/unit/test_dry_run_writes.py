"""The sinks' dry-run writes (``Sink.write(dry=True)``, a standby's warm-up): every
row goes the way of a write up to the request, and nothing is sent. In process,
with stand-ins for the Cassandra session and the Datastore client that fail the
test on any call that would reach the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from google.cloud import datastore
from pyspark.sql.types import LongType, StringType, StructField, StructType

from sluice_job.sinks import cassandra_writer
from sluice_job.sinks import datastore as datastore_sink
from sluice_job.sinks.cassandra_batches import Bounds
from sluice_job.sinks.cassandra_target import CassandraTarget
from sluice_job.sinks.datastore import DatastoreTarget, write_partition
from sluice_job.sinks.datastore_entities import KEY_COLUMN, shape

pytestmark = pytest.mark.unit

COLUMNS = ("event_id", "seq")


@dataclass(order=True)
class Bound:
    """What ``PreparedStatement.bind`` returns, as far as the writer reads it."""

    values: list[bytes | None]
    routing_key: bytes


@dataclass
class Statement:
    """The prepared statement; records what is bound and the requests made of it."""

    bound: list[Bound] = field(default_factory=list)
    requests: list[list[Bound]] = field(default_factory=list)

    def request(self, group: list[Bound]) -> list[Bound]:
        self.requests.append(group)
        return group

    def bind(self, values: Sequence[Any]) -> Bound:
        made = Bound([str(v).encode() for v in values], str(values[0]).encode())
        self.bound.append(made)
        return made


class Metadata:
    def get_replicas(self, keyspace: str, routing_key: bytes) -> list[str]:
        return ["node-a" if routing_key[-1] % 2 else "node-b"]


class Cluster:
    metadata = Metadata()


class Session:
    """A session whose every request fails the test."""

    cluster = Cluster()

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a dry run sent a request")

    execute_async = execute


@pytest.fixture
def cassandra(monkeypatch: pytest.MonkeyPatch) -> Statement:
    statement = Statement()
    sent: list[Any] = []

    def execute_concurrent(*args: Any, **kwargs: Any) -> Any:
        sent.append(args)
        raise AssertionError("a dry run executed its requests")

    monkeypatch.setattr(cassandra_writer, "_session", lambda _target: Session())
    monkeypatch.setattr(cassandra_writer, "_statement", lambda *_args: statement)
    monkeypatch.setattr(cassandra_writer, "execute_concurrent", execute_concurrent)
    monkeypatch.setattr(cassandra_writer, "_request", statement.request)
    return statement


TARGET = CassandraTarget(("127.0.0.1",), "ks", "events", None, bounds=Bounds(rows=4))


def test_a_dry_cassandra_write_binds_and_groups_every_row_and_sends_nothing(
    cassandra: Statement,
) -> None:
    rows = [(f"e{i}", i) for i in range(25)]

    assert cassandra_writer.write_rows(TARGET, COLUMNS, 7, rows, dry=True) == 25

    assert [b.values[-1] for b in cassandra.bound] == [b"7"] * 25  # bound with the version
    assert sorted(b for group in cassandra.requests for b in group) == sorted(cassandra.bound)
    assert all(len(group) <= 4 for group in cassandra.requests)  # grouped, bounds kept


def test_a_dry_cassandra_write_of_arrow_batches_reports_the_rows_it_would_write(
    cassandra: Statement,
) -> None:
    batch = pa.RecordBatch.from_pydict({"event_id": ["a", "b", "c"], "seq": [1, 2, 3]})

    (counted,) = cassandra_writer.write_arrow(TARGET, COLUMNS, 3, [batch], dry=True)

    assert counted.to_pydict() == {"written": [3]}
    assert len(cassandra.bound) == 3


def test_a_cassandra_write_without_dry_does_send(cassandra: Statement) -> None:
    with pytest.raises(AssertionError, match="executed its requests"):
        cassandra_writer.write_rows(TARGET, COLUMNS, 7, [("e", 1)])


class Client:
    """Makes keys as a ``datastore.Client`` does; any call to the service fails the
    test."""

    def __init__(self) -> None:
        self.keys = 0

    def key(self, kind: str, ident: Any) -> datastore.Key:
        self.keys += 1
        return datastore.Key(kind, ident, project="p")  # type: ignore[no-untyped-call]

    def transaction(self, **kwargs: Any) -> Any:
        raise AssertionError("a dry run began a transaction")

    def get_multi(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a dry run looked keys up")

    def put_multi(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a dry run put entities")


SCHEMA = StructType([StructField(KEY_COLUMN, StringType()), StructField("seq", LongType())])
DATASTORE = DatastoreTarget("p", "Event", None, None, "127.0.0.1:1")


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Client:
    made = Client()
    monkeypatch.setattr(datastore_sink, "_client", lambda _target: made)
    return made


def test_a_dry_datastore_write_builds_every_entity_and_sends_nothing(client: Client) -> None:
    rows = [(f"k{i}", i) for i in range(1_234)]  # three chunks

    result = write_partition(DATASTORE, shape(SCHEMA), 9, rows, dry=True)

    assert result.error is None
    assert (result.rows, result.written, result.chunks, result.retries) == (1_234, 0, 0, 0)
    assert client.keys == 1_234


def test_a_dry_datastore_write_still_refuses_a_row_without_a_key(client: Client) -> None:
    result = write_partition(DATASTORE, shape(SCHEMA), 9, [("k", 1), (None, 2)], dry=True)

    assert result.error is not None
    assert KEY_COLUMN in result.error
    assert result.written == 0


def test_a_datastore_write_without_dry_does_send(client: Client) -> None:
    with pytest.raises(AssertionError, match="began a transaction"):
        write_partition(DATASTORE, shape(SCHEMA), 9, [("k", 1)])
