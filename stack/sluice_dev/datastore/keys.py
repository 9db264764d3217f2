"""Entity keys as the store sees them: a partition and a hashable path.

Datastore orders keys element by element: kind, then numeric ids before names.
:meth:`StoreKey.order` is that order, used by queries and their cursors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sluice_dev.datastore import messages
from sluice_dev.datastore.errors import invalid

RESERVED = re.compile(r"^__.*__$")
MAX_KEY_NAME_BYTES = 1500

Element = tuple[str, int | str]
"""One path element: its kind and its id (int) or name (str)."""

Partition = tuple[str, str, str]
"""Project, database and namespace."""

Order = tuple[tuple[str, int, int | str], ...]
"""A path's position in Datastore's key order."""


def order(path: tuple[Element, ...]) -> Order:
    return tuple((kind, 0 if isinstance(ident, int) else 1, ident) for kind, ident in path)


@dataclass(frozen=True)
class StoreKey:
    partition: Partition
    path: tuple[Element, ...]

    @property
    def project(self) -> str:
        return self.partition[0]

    @property
    def kind(self) -> str:
        return self.path[-1][0]

    def order(self) -> Order:
        return order(self.path)

    def to_pb(self) -> Any:
        key = messages.Key()
        project, database, namespace = self.partition
        key.partition_id.project_id = project
        key.partition_id.database_id = database
        key.partition_id.namespace_id = namespace
        for kind, ident in self.path:
            element = key.path.add(kind=kind)
            if isinstance(ident, int):
                element.id = ident
            else:
                element.name = ident
        return key


def partition_of(key_pb: Any, project: str, database: str) -> Partition:
    """The key's partition; it must belong to the request's project and database."""
    given = key_pb.partition_id
    if given.project_id and given.project_id != project:
        raise invalid(f"mismatched project: key in {given.project_id!r}, request for {project!r}")
    if given.database_id != database:
        raise invalid(f"mismatched database: key in {given.database_id!r}, request {database!r}")
    return (project, database, given.namespace_id)


def is_complete(key_pb: Any) -> bool:
    return bool(key_pb.path) and key_pb.path[-1].WhichOneof("id_type") is not None


def from_pb(key_pb: Any, project: str, database: str) -> StoreKey:
    """A complete key; raises INVALID_ARGUMENT for an incomplete or malformed one."""
    if not is_complete(key_pb):
        raise invalid("key path is empty or its last element has neither id nor name")
    return StoreKey(partition_of(key_pb, project, database), _path(key_pb))


def completed(key_pb: Any, partition: Partition, ident: int) -> StoreKey:
    """An incomplete key completed with the id ``ident``."""
    parent = _elements(list(key_pb.path)[:-1])
    kind = _kind(key_pb.path[-1].kind)
    return StoreKey(partition, (*parent, (kind, ident)))


def _path(key_pb: Any) -> tuple[Element, ...]:
    return _elements(list(key_pb.path))


def _elements(elements: list[Any]) -> tuple[Element, ...]:
    return tuple(_element(e) for e in elements)


def _element(element: Any) -> Element:
    kind = _kind(element.kind)
    which = element.WhichOneof("id_type")
    if which == "id":
        if element.id <= 0:
            raise invalid(f"key id {element.id} of kind {kind!r} must be positive")
        return kind, int(element.id)
    if which == "name":
        return kind, _name(element.name, kind)
    raise invalid(f"key path element of kind {kind!r} has neither id nor name")


def _kind(kind: str) -> str:
    if not kind:
        raise invalid("key path element has an empty kind")
    if RESERVED.match(kind):
        raise invalid(f"kind {kind!r} is reserved")
    return kind


def _name(name: str, kind: str) -> str:
    if not name:
        raise invalid(f"key name of kind {kind!r} is empty")
    if RESERVED.match(name):
        raise invalid(f"key name {name!r} of kind {kind!r} is reserved")
    if len(name.encode()) > MAX_KEY_NAME_BYTES:
        raise invalid(f"key name of kind {kind!r} is longer than {MAX_KEY_NAME_BYTES} bytes")
    return name
