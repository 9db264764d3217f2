"""The CRD's schema from the spec model: pydantic's JSON schema made structural.

The API server serves only *structural* OpenAPI v3 schemas: every field typed, no
references, no unions. ``structural`` converts the model's JSON schema into one and
fails loudly on anything it cannot express, so a model change the CRD cannot follow
breaks the build, not a cluster. Pure; ``crd`` assembles the CRD from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from sluice_api.spec import PipelineSpec

Schema = dict[str, Any]


# Keywords of a JSON schema that mean the same in a structural OpenAPI v3 schema.
_KEPT: Final = frozenset(
    {
        "type",
        "description",
        "enum",
        "default",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "required",
    }
)
# Keywords dropped: documentation only, or said by pruning and strict field validation.
_DROPPED: Final = frozenset({"title", "$defs"})
# The order keywords appear in the generated file: what a field is, then its bounds.
_ORDER: Final = (
    "type",
    "description",
    "format",
    "enum",
    "default",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
    "required",
    "properties",
    "items",
    "additionalProperties",
)


class SchemaError(ValueError):
    """The model uses something the CRD cannot express, or lacks a description."""


# -- the model's JSON schema ----------------------------------------------------------


class _FactoryDefaults(GenerateJsonSchema):
    """Also emits defaults made by ``default_factory`` (pydantic leaves them out).

    A model default becomes only its non-default fields (usually ``{}``): the API
    server then fills the nested defaults itself, each documented where it is declared.
    """

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is None or schema.get("default_factory_takes_data"):
            return super().get_default_value(schema)
        value = factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return value if value is not None else NoDefault


def model_schema() -> Schema:
    """The JSON schema of ``PipelineSpec`` with wire (camelCase) names."""
    return PipelineSpec.model_json_schema(by_alias=True, schema_generator=_FactoryDefaults)


# -- JSON schema -> structural schema ------------------------------------------------


def structural(node: Mapping[str, Any], defs: Mapping[str, Any], path: str = "spec") -> Schema:
    """``node`` as a structural schema: references inlined, ``X | None`` as optional X,
    free-form objects preserved, unknown keywords an error (the build fails loudly)."""
    if "$ref" in node:
        return _inline_ref(node, defs, path)
    if "anyOf" in node:
        return _optional(node, defs, path)
    result: Schema = {}
    for key, value in node.items():
        if key in _KEPT:
            if not (key == "default" and value is None):
                result[key] = value
        elif key == "properties":
            result[key] = {
                name: structural(sub, defs, f"{path}.{name}") for name, sub in value.items()
            }
        elif key == "items":
            result[key] = structural(value, defs, f"{path}[]")
        elif key == "additionalProperties":
            result.update(_additional(value, defs, path, has_properties="properties" in node))
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            # JSON Schema 2020 gives the bound; OpenAPI v3.0 a flag next to min/max.
            result[key.replace("exclusiveM", "m")] = value
            result[key] = True
        elif key not in _DROPPED:
            raise SchemaError(f"{path}: the CRD cannot express JSON schema keyword {key!r}")
    return result


def _inline_ref(node: Mapping[str, Any], defs: Mapping[str, Any], path: str) -> Schema:
    """The referenced definition, with the referring node's keywords taking precedence
    (the field's description says more about it than the class docstring)."""
    target = defs[node["$ref"].removeprefix("#/$defs/")]
    siblings = {key: value for key, value in node.items() if key != "$ref"}
    return {**structural(target, defs, path), **structural(siblings, defs, path)}


def _optional(node: Mapping[str, Any], defs: Mapping[str, Any], path: str) -> Schema:
    """``anyOf: [X, {type: null}]`` is X: optional means absent, not required."""
    choices = [choice for choice in node["anyOf"] if choice != {"type": "null"}]
    if len(choices) != 1:
        raise SchemaError(f"{path}: unions other than 'X | None' have no structural form")
    siblings = {key: value for key, value in node.items() if key != "anyOf"}
    return {**structural(choices[0], defs, path), **structural(siblings, defs, path)}


def _additional(value: Any, defs: Mapping[str, Any], path: str, *, has_properties: bool) -> Schema:
    if value is False and has_properties:
        return {}  # unknown fields: pruned, or rejected under strict field validation
    if value is True or value == {}:
        return {"x-kubernetes-preserve-unknown-fields": True}  # dict[str, Any]
    if isinstance(value, Mapping) and not has_properties:
        return {"additionalProperties": structural(value, defs, f"{path}[*]")}
    raise SchemaError(f"{path}: additionalProperties={value!r} has no structural form")


def walk(schema: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    """Every schema node under ``schema`` with its dotted path (``[]`` for list items,
    ``[*]`` for map values)."""
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}[*]")


def canonical(schema: Mapping[str, Any]) -> Schema:
    """``schema`` with keywords in one fixed order at every level, for a readable file."""
    result: Schema = {key: schema[key] for key in _ORDER if key in schema}
    result.update((key, value) for key, value in schema.items() if key not in result)
    if "properties" in result:
        result["properties"] = {k: canonical(v) for k, v in result["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(result.get(key), dict):
            result[key] = canonical(result[key])
    return result


def missing_descriptions(schema: Schema) -> list[str]:
    """Paths of properties without a description (``kubectl explain`` shows nothing).
    ``metadata`` is exempt: the API server forbids describing it."""
    return [
        f"{path}.{name}".lstrip(".")
        for path, node in walk(schema, "")
        for name, sub in node.get("properties", {}).items()
        if (path, name) != ("", "metadata") and not str(sub.get("description", "")).strip()
    ]
