"""The local Datastore server's rules, in process: what a commit may hold, which
sequences of mutations are refused, optimistic conflicts, key order."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from sluice_dev.datastore import messages, mutations
from sluice_dev.datastore.errors import ApiError
from sluice_dev.datastore.keys import StoreKey
from sluice_dev.datastore.store import Store

pytestmark = pytest.mark.unit

PROJECT = "p"


def key_pb(name: str | int, kind: str = "K") -> Any:
    key = messages.Key()
    key.partition_id.project_id = PROJECT
    element = key.path.add(kind=kind)
    if isinstance(name, int):
        element.id = name
    else:
        element.name = name
    return key


def upsert(name: str, **values: int) -> Any:
    mutation = messages.CommitRequest().mutations.add()
    mutation.upsert.key.CopyFrom(key_pb(name))
    for prop, value in values.items():
        mutation.upsert.properties[prop].integer_value = value
    return mutation


def op(kind: str, name: str) -> Any:
    mutation = messages.CommitRequest().mutations.add()
    if kind == "delete":
        mutation.delete.CopyFrom(key_pb(name))
    else:
        getattr(mutation, kind).key.CopyFrom(key_pb(name))
    return mutation


def commit(store: Store, *items: Any, transactional: bool = False, reads: Any = None) -> Any:
    planned = mutations.plan(list(items), PROJECT, "", transactional=transactional)
    return mutations.apply(store, planned, reads or {})


def status(raised: pytest.ExceptionInfo[ApiError]) -> grpc.StatusCode:
    return raised.value.code


def test_more_than_500_mutations_are_refused() -> None:
    with pytest.raises(ApiError, match="more than 500") as raised:
        mutations.plan([upsert(f"k{i}") for i in range(501)], PROJECT, "", transactional=True)
    assert status(raised) == grpc.StatusCode.INVALID_ARGUMENT


def test_a_non_transactional_commit_may_not_touch_an_entity_twice() -> None:
    with pytest.raises(ApiError, match="multiple mutations"):
        commit(Store(), upsert("a"), upsert("a"))


@pytest.mark.parametrize(
    ("first", "second"),
    [("insert", "insert"), ("update", "insert"), ("upsert", "insert"), ("delete", "update")],
)
def test_forbidden_sequences_in_a_transaction(first: str, second: str) -> None:
    with pytest.raises(ApiError, match=f"{first} followed by {second}"):
        commit(Store(), op(first, "a"), op(second, "a"), transactional=True)


def test_a_transaction_applies_mutations_of_one_entity_in_order() -> None:
    store = Store()
    commit(store, upsert("a", n=1), upsert("a", n=2), transactional=True)
    record = store.get(StoreKey((PROJECT, "", ""), (("K", "a"),)))
    assert record is not None
    assert record.entity.properties["n"].integer_value == 2


def test_insert_of_an_existing_entity_and_update_of_a_missing_one_fail() -> None:
    store = Store()
    commit(store, upsert("a"))
    with pytest.raises(ApiError) as exists:
        commit(store, op("insert", "a"))
    with pytest.raises(ApiError) as missing:
        commit(store, op("update", "b"))
    assert (status(exists), status(missing)) == (
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.NOT_FOUND,
    )


def test_a_commit_whose_reads_changed_meanwhile_aborts_and_writes_nothing() -> None:
    store = Store()
    key = StoreKey((PROJECT, "", ""), (("K", "a"),))
    seen = {key: store.version_of(key)}  # read: missing
    commit(store, upsert("a", n=1))  # someone else writes it
    with pytest.raises(ApiError) as raised:
        commit(store, upsert("a", n=2), upsert("b"), transactional=True, reads=seen)
    assert status(raised) == grpc.StatusCode.ABORTED
    record = store.get(key)
    assert record is not None
    assert record.entity.properties["n"].integer_value == 1
    assert store.count(PROJECT) == 1


def test_a_deleted_and_recreated_entity_still_counts_as_changed() -> None:
    store = Store()
    key = StoreKey((PROJECT, "", ""), (("K", "a"),))
    seen = {key: store.version_of(key)}
    commit(store, upsert("a"))
    commit(store, op("delete", "a"))
    with pytest.raises(ApiError):
        commit(store, upsert("a"), transactional=True, reads=seen)


def test_an_incomplete_key_gets_a_new_id() -> None:
    mutation = messages.CommitRequest().mutations.add()
    mutation.insert.key.partition_id.project_id = PROJECT
    mutation.insert.key.path.add(kind="K")
    response = commit(Store(), mutation)
    assert response.mutation_results[0].key.path[0].id > 0


def test_keys_order_numeric_ids_before_names() -> None:
    def key(*path: tuple[str, int | str]) -> StoreKey:
        return StoreKey((PROJECT, "", ""), path)

    ordered = sorted(
        [key(("K", "b")), key(("K", 10)), key(("K", "a")), key(("K", 2)), key(("J", "z"))],
        key=StoreKey.order,
    )
    assert [k.path[0][1] for k in ordered] == ["z", 2, 10, "a", "b"]


def test_indexed_strings_over_1500_bytes_are_refused_naming_the_property() -> None:
    mutation = upsert("a")
    mutation.upsert.properties["text"].string_value = "x" * 1501
    with pytest.raises(ApiError, match="'text' is longer than 1500 bytes"):
        commit(Store(), mutation)
    mutation.upsert.properties["text"].exclude_from_indexes = True
    commit(Store(), mutation)
