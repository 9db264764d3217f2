"""The limits Datastore enforces on an entity written, which a writer must respect:
reserved and overlong property names, indexed strings and blobs over 1500 bytes,
arrays inside arrays, and the 1 MiB entity size. A violation fails the commit with
INVALID_ARGUMENT, naming the property, as the real service does."""

from __future__ import annotations

from typing import Any

from sluice_dev.datastore.errors import invalid
from sluice_dev.datastore.keys import RESERVED

MAX_INDEXED_BYTES = 1500
MAX_NAME_BYTES = 1500
MAX_ENTITY_BYTES = 1_048_572


def check_entity(entity: Any) -> None:
    size = entity.ByteSize()
    if size > MAX_ENTITY_BYTES:
        raise invalid(f"entity is too big: {size} bytes, the limit is {MAX_ENTITY_BYTES}")
    _check_properties(entity)


def _check_properties(entity: Any) -> None:
    for name, value in entity.properties.items():
        _check_name(name)
        _check_value(name, value, in_array=False)


def _check_name(name: str) -> None:
    if not name:
        raise invalid("a property name is empty")
    if RESERVED.match(name):
        raise invalid(f"property name {name!r} is reserved")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise invalid(f"property name {name[:40]!r}... is longer than {MAX_NAME_BYTES} bytes")


def _check_value(name: str, value: Any, *, in_array: bool) -> None:
    which = value.WhichOneof("value_type")
    if which == "array_value":
        if in_array:
            raise invalid(f"property {name!r}: an array value cannot contain another array")
        for element in value.array_value.values:
            _check_value(name, element, in_array=True)
    elif which == "entity_value":
        _check_properties(value.entity_value)
    elif which in ("string_value", "blob_value") and not value.exclude_from_indexes:
        raw = value.string_value.encode() if which == "string_value" else value.blob_value
        if len(raw) > MAX_INDEXED_BYTES:
            raise invalid(
                f"the value of property {name!r} is longer than {MAX_INDEXED_BYTES} bytes "
                "and must be excluded from indexes"
            )
