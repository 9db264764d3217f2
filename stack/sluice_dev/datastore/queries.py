"""RunQuery over the store: enough for a reader to page through a kind.

Supported: one kind (or none: every kind), equality filters on properties (alone or
ANDed), key order, keys-only projection, limit, offset, start and end cursors.
Results come in batches of :data:`BATCH` like the real service's, with an end
cursor to continue from. Anything else (inequalities, other orders, projections,
GQL) is refused by name instead of answered wrongly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from sluice_dev.datastore import messages
from sluice_dev.datastore.errors import invalid, unsupported
from sluice_dev.datastore.keys import Partition, StoreKey
from sluice_dev.datastore.store import Record, Store

BATCH: Final = 300
Match = Callable[[Any], bool]


def run(store: Store, partition: Partition, query: Any) -> Any:
    """The first ``QueryResultBatch`` of ``query`` in ``partition``."""
    match = _matcher(query)
    keys_only = _keys_only(query)
    _check_order(query)
    kind = _kind(query)
    start, end = _cursor(query.start_cursor), _cursor(query.end_cursor)
    limit = query.limit.value if query.HasField("limit") else None
    rows = (
        (key, record)
        for key, record in store.scan(partition, kind, after=start)
        if (end is None or key.order() <= end) and match(record.entity)
    )
    return _batch(rows, query.offset, limit, keys_only, store.version)


def _batch(
    rows: Iterator[tuple[StoreKey, Record]],
    offset: int,
    limit: int | None,
    keys_only: bool,
    version: int,
) -> Any:
    batch = messages.QueryResultBatch(snapshot_version=version)
    batch.entity_result_type = (
        messages.EntityResult.KEY_ONLY if keys_only else messages.EntityResult.FULL
    )
    last: StoreKey | None = None
    for key, record in rows:
        if batch.skipped_results < offset:
            batch.skipped_results += 1
            last = key
            continue
        if (limit is not None and len(batch.entity_results) >= limit) or len(
            batch.entity_results
        ) >= BATCH:
            batch.more_results = _more_after(limit, len(batch.entity_results))
            break
        _add(batch, key, record, keys_only)
        last = key
    else:
        batch.more_results = messages.QueryResultBatch.NO_MORE_RESULTS
    if last is not None:
        batch.end_cursor = _encode(last)
    return batch


def _more_after(limit: int | None, returned: int) -> Any:
    kind = messages.QueryResultBatch
    return kind.MORE_RESULTS_AFTER_LIMIT if limit == returned else kind.NOT_FINISHED


def _add(batch: Any, key: StoreKey, record: Record, keys_only: bool) -> None:
    result = batch.entity_results.add(version=record.version, cursor=_encode(key))
    if keys_only:
        result.entity.key.CopyFrom(key.to_pb())
    else:
        result.entity.CopyFrom(record.entity)


def _kind(query: Any) -> str | None:
    if len(query.kind) > 1:
        raise invalid("a query may name at most one kind")
    return query.kind[0].name if query.kind else None


def _keys_only(query: Any) -> bool:
    names = [p.property.name for p in query.projection]
    if not names:
        return False
    if names == ["__key__"]:
        return True
    raise unsupported(f"projection on {names}")


def _check_order(query: Any) -> None:
    for order in query.order:
        ascending = order.direction != messages.PropertyOrder.DESCENDING
        if order.property.name != "__key__" or not ascending:
            raise unsupported(f"ordering by {order.property.name!r} other than __key__ ascending")
    if query.distinct_on:
        raise unsupported("distinct_on")


def _matcher(query: Any) -> Match:
    if not query.HasField("filter"):
        return lambda _entity: True
    return _filter(query.filter)


def _filter(filter_pb: Any) -> Match:
    which = filter_pb.WhichOneof("filter_type")
    if which == "property_filter":
        return _property_filter(filter_pb.property_filter)
    composite = filter_pb.composite_filter
    if composite.op != messages.CompositeFilter.AND:
        raise unsupported("OR filters")
    parts: Sequence[Match] = [_filter(f) for f in composite.filters]
    return lambda entity: all(part(entity) for part in parts)


def _property_filter(prop: Any) -> Match:
    name = prop.property.name
    if prop.op != messages.PropertyFilter.EQUAL or name == "__key__":
        raise unsupported(f"filter on {name!r} other than a property equality")
    wanted = _comparable(prop.value)
    return lambda entity: wanted in _indexed(entity, name)


def _indexed(entity: Any, name: str) -> list[bytes]:
    """The indexed values of a property (each element, for an array)."""
    if name not in entity.properties:
        return []
    value = entity.properties[name]
    values = value.array_value.values if value.HasField("array_value") else [value]
    return [_comparable(v) for v in values if not v.exclude_from_indexes]


def _comparable(value: Any) -> bytes:
    plain = messages.Value()
    plain.CopyFrom(value)
    plain.ClearField("exclude_from_indexes")
    plain.ClearField("meaning")
    data: bytes = plain.SerializeToString(deterministic=True)
    return data


def _encode(key: StoreKey) -> bytes:
    return json.dumps(key.order()).encode()


def _cursor(raw: bytes) -> tuple[Any, ...] | None:
    if not raw:
        return None
    try:
        position = _tuples(json.loads(raw))
    except ValueError:
        raise invalid("cursor is not one this server issued") from None
    if not isinstance(position, tuple):
        raise invalid("cursor is not one this server issued")
    return position


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
