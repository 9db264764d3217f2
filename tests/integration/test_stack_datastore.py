"""The stack's Datastore server does what the real client and the sink rely on,
reached as Google's emulator would be (``DATASTORE_EMULATOR_HOST``, insecure gRPC):
reads and writes, paged queries, optimistic transactions that abort on conflict,
and fault switches and counters that stay inside one project."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import datastore

from sluice_dev.datastore import remote
from tests.support.datastore import KIND

pytestmark = pytest.mark.integration


@pytest.fixture
def client(
    datastore_host: str, datastore_project: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """The client exactly as a user points it at an emulator: one variable."""
    monkeypatch.setenv("DATASTORE_EMULATOR_HOST", datastore_host)
    made = datastore.Client(project=datastore_project, namespace="tests")
    yield made
    made.close()


def put(client: Any, name: str, **values: Any) -> Any:
    entity = datastore.Entity(client.key(KIND, name))
    entity.update(values)
    client.put(entity)
    return entity


def test_what_is_put_is_got_back_with_every_value_type(client: Any) -> None:
    values = {
        "text": "héllo",
        "n": 2**62,
        "x": 1.5,
        "ok": True,
        "blob": b"\x00\xff",
        "tags": ["a", "b"],
        "nothing": None,
    }
    put(client, "a", **values)
    got = client.get(client.key(KIND, "a"))
    assert dict(got) == values
    assert client.get(client.key(KIND, "missing")) is None


def test_queries_page_through_every_entity_of_a_kind_in_key_order(client: Any) -> None:
    client.put_multi(
        [datastore.Entity(client.key(KIND, f"k{i:04d}")) for i in range(450)]
        + [datastore.Entity(client.key("Other", "x"))]
    )
    names = [e.key.name for e in client.query(kind=KIND).fetch()]
    assert names == [f"k{i:04d}" for i in range(450)]  # more than one 300-entity batch
    assert len(list(client.query(kind=KIND).fetch(limit=10, offset=445))) == 5
    keys_only = client.query(kind="Other")
    keys_only.keys_only()
    assert [e.key.name for e in keys_only.fetch()] == ["x"]


def test_equality_filters_select_matching_entities(client: Any) -> None:
    put(client, "a", page="/home", n=1)
    put(client, "b", page="/cart", n=2)
    put(client, "c", page="/home", n=3)
    query = client.query(kind=KIND)
    query.add_filter(filter=datastore.query.PropertyFilter("page", "=", "/home"))
    assert sorted(e.key.name for e in query.fetch()) == ["a", "c"]


def test_a_transaction_whose_read_changed_meanwhile_is_aborted(client: Any) -> None:
    put(client, "a", n=1)
    transaction = client.transaction()
    transaction.begin()
    seen = client.get(client.key(KIND, "a"), transaction=transaction)
    put(client, "a", n=2)  # another writer gets in first
    seen["n"] = seen["n"] + 10
    transaction.put(seen)
    with pytest.raises(exceptions.Aborted):
        transaction.commit()
    assert client.get(client.key(KIND, "a"))["n"] == 2


def test_a_commit_over_500_mutations_is_refused(client: Any) -> None:
    with pytest.raises(exceptions.InvalidArgument, match="more than 500"):
        client.put_multi([datastore.Entity(client.key(KIND, f"k{i}")) for i in range(501)])


def test_faults_and_counters_stay_in_their_project(
    client: Any, datastore_project: str, unique_name: Any
) -> None:
    other = unique_name("ds-other")
    try:
        remote.inject(other, "Commit", "UNAVAILABLE", count=1)
        put(client, "a", n=1)  # our project: no fault
        remote.inject(datastore_project, "Commit", "UNAVAILABLE", count=1)
        with pytest.raises(exceptions.ServiceUnavailable, match="injected UNAVAILABLE"):
            put(client, "b", n=1)
        ours, theirs = remote.stats(datastore_project), remote.stats(other)
        assert ours["calls"]["Commit"] == 2
        assert ours["failures"] == {"Commit:UNAVAILABLE": 1}
        assert ours["entities"] == 1
        assert theirs["pending_faults"] == {"Commit": 1}
        assert theirs["calls"] == {}
    finally:
        remote.forget(other)


def test_a_fault_after_the_call_loses_the_reply_but_not_the_write(
    client: Any, datastore_project: str
) -> None:
    remote.inject(datastore_project, "Commit", "DEADLINE_EXCEEDED", when="after")
    with pytest.raises(exceptions.DeadlineExceeded):
        put(client, "a", n=7)
    assert client.get(client.key(KIND, "a"))["n"] == 7
