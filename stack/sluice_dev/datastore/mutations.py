"""A Commit's mutations: Datastore's rules checked first, then written at once.

:func:`plan` is pure: it validates the request (at most 500 mutations; complete
keys where required; which sequences of mutations of one entity are allowed) and
touches no data. :func:`apply` holds the store's lock while it checks the
transaction's reads for conflicts (ABORTED), checks existence for insert and update,
and writes everything at one new version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import grpc

from sluice_dev.datastore import keys, messages, validation
from sluice_dev.datastore.errors import ApiError, invalid
from sluice_dev.datastore.keys import Partition, StoreKey
from sluice_dev.datastore.store import Store

MAX_MUTATIONS: Final = 500


class Op(StrEnum):
    INSERT = "insert"
    UPDATE = "update"
    UPSERT = "upsert"
    DELETE = "delete"


# (earlier, later) mutations of one entity that a transactional commit may not hold.
FORBIDDEN: Final = frozenset(
    {(Op.INSERT, Op.INSERT), (Op.UPDATE, Op.INSERT), (Op.UPSERT, Op.INSERT), (Op.DELETE, Op.UPDATE)}
)


@dataclass(frozen=True)
class Planned:
    op: Op
    key_pb: Any
    partition: Partition
    key: StoreKey | None
    """``None``: an incomplete key, completed with a new id when applied."""
    entity: Any | None
    base_version: int | None


def plan(
    mutations: Sequence[Any], project: str, database: str, *, transactional: bool
) -> list[Planned]:
    """The validated mutations, in order (pure)."""
    if len(mutations) > MAX_MUTATIONS:
        raise invalid(f"cannot write more than {MAX_MUTATIONS} entities in a single call")
    planned = [_planned(m, project, database) for m in mutations]
    _check_sequences(planned, transactional=transactional)
    return planned


def _planned(mutation: Any, project: str, database: str) -> Planned:
    which = mutation.WhichOneof("operation")
    if which is None:
        raise invalid("a mutation has no operation")
    op = Op(which)
    if mutation.property_transforms or mutation.HasField("property_mask"):
        raise ApiError(grpc.StatusCode.UNIMPLEMENTED, "property masks and transforms")
    if mutation.WhichOneof("conflict_detection_strategy") == "update_time":
        raise ApiError(grpc.StatusCode.UNIMPLEMENTED, "conflict detection by update_time")
    base = mutation.base_version if mutation.HasField("base_version") else None
    entity = None if op is Op.DELETE else getattr(mutation, which)
    key_pb = mutation.delete if entity is None else entity.key
    partition = keys.partition_of(key_pb, project, database)
    if entity is not None:
        validation.check_entity(entity)
    return Planned(op, key_pb, partition, _key_or_none(key_pb, op, project, database), entity, base)


def _key_or_none(key_pb: Any, op: Op, project: str, database: str) -> StoreKey | None:
    """The complete key, or ``None`` for an incomplete one that gets an id (insert
    and upsert only)."""
    if keys.is_complete(key_pb) or op in (Op.UPDATE, Op.DELETE) or not key_pb.path:
        return keys.from_pb(key_pb, project, database)
    return None


def _check_sequences(planned: Sequence[Planned], *, transactional: bool) -> None:
    last: dict[StoreKey, Op] = {}
    for item in planned:
        if item.key is None:
            continue
        earlier = last.get(item.key)
        if earlier is not None and not transactional:
            raise invalid(
                "a non-transactional commit may not contain multiple mutations "
                f"affecting the same entity ({_describe(item.key)})"
            )
        if earlier is not None and (earlier, item.op) in FORBIDDEN:
            raise invalid(f"{earlier} followed by {item.op} of {_describe(item.key)}")
        last[item.key] = item.op


def apply(store: Store, planned: Sequence[Planned], reads: Mapping[StoreKey, int]) -> Any:
    """Check conflicts and existence, write, and answer the ``CommitResponse``."""
    response = messages.CommitResponse()
    with store.lock:
        _check_reads(store, reads)
        staged: dict[StoreKey, Any | None] = {}
        outcomes = [_stage(store, staged, item) for item in planned]
        version = store.write(staged) if staged else store.version
    for key, allocated, conflict in outcomes:
        result = response.mutation_results.add(version=version, conflict_detected=conflict)
        if conflict:
            result.version = store.version_of(key)
        if allocated:
            result.key.CopyFrom(key.to_pb())
    return response


def _check_reads(store: Store, reads: Mapping[StoreKey, int]) -> None:
    for key, seen in reads.items():
        if store.version_of(key) != seen:
            raise ApiError(
                grpc.StatusCode.ABORTED,
                "too much contention on these datastore entities. please try again. "
                f"({_describe(key)} changed since the transaction read it)",
            )


def _stage(
    store: Store, staged: dict[StoreKey, Any | None], item: Planned
) -> tuple[StoreKey, bool, bool]:
    """Stage one mutation; returns (key, whether its id was allocated, conflict)."""
    allocated = item.key is None
    key = item.key or keys.completed(item.key_pb, item.partition, store.new_id())
    if item.base_version is not None and store.version_of(key) != item.base_version:
        return key, allocated, True
    exists = staged[key] is not None if key in staged else store.get(key) is not None
    if item.op is Op.INSERT and exists:
        raise ApiError(grpc.StatusCode.ALREADY_EXISTS, f"entity already exists: {_describe(key)}")
    if item.op is Op.UPDATE and not exists:
        raise ApiError(grpc.StatusCode.NOT_FOUND, f"no entity to update: {_describe(key)}")
    staged[key] = None if item.op is Op.DELETE else _stored(item.entity, key)
    return key, allocated, False


def _stored(entity: Any, key: StoreKey) -> Any:
    stored = messages.Entity()
    stored.CopyFrom(entity)
    stored.key.CopyFrom(key.to_pb())
    return stored


def _describe(key: StoreKey) -> str:
    path = "/".join(f"{kind}:{ident}" for kind, ident in key.path)
    return f"{path} in project {key.project!r}"
