"""The committed CRD is the one the spec model generates, and it is a schema the API
server serves: structural, every field described (``kubectl explain`` shows it), the
model's bounds, enums and defaults carried over."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sluice_api.spec import PipelineSpec
from sluice_api.status import wire_fields
from sluice_dev.paths import REPO_ROOT
from sluice_operator import crd, crd_schema

pytestmark = pytest.mark.unit

COMMITTED = REPO_ROOT / "crds" / crd.FILE_NAME

# Keywords of apiextensions.k8s.io/v1 JSONSchemaProps that the generator may emit.
STRUCTURAL = frozenset(
    {
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
        "required",
        "properties",
        "items",
        "additionalProperties",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
    }
)


def openapi() -> dict[str, Any]:
    schema: dict[str, Any] = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path (``[]`` for list items, ``[*]`` for map values)."""
    yield path or ".", schema
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}[*]")


def test_committed_file_is_generated_from_the_model() -> None:
    expected = crd.render(crd.build_crd())
    committed = COMMITTED.read_text(encoding="utf-8") if COMMITTED.exists() else ""
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            expected.splitlines(keepends=True),
            "committed",
            "generated",
            n=1,
        )
    )
    assert committed == expected, (
        f"{COMMITTED.relative_to(REPO_ROOT)} is stale; regenerate it with\n"
        f"    {crd.REGENERATE}\n{diff[:4000]}"
    )
    assert yaml.safe_load(committed) == crd.build_crd()


def test_every_property_has_a_description() -> None:
    assert crd_schema.missing_descriptions(openapi()) == []


def test_a_field_without_description_fails_the_build() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert crd_schema.missing_descriptions(schema) == ["a"]


def test_schema_is_structural() -> None:
    for path, node in nodes(openapi()):
        assert set(node) <= STRUCTURAL, f"{path}: {sorted(set(node) - STRUCTURAL)}"
        typed = "type" in node or node.get("x-kubernetes-preserve-unknown-fields")
        assert typed, f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        assert node.get("additionalProperties") is not False, path


@pytest.mark.parametrize(
    "keyword",
    [
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"const": 3},
    ],
    ids=["oneOf", "union", "const"],
)
def test_constructs_without_structural_form_fail_the_build(keyword: dict[str, Any]) -> None:
    with pytest.raises(crd_schema.SchemaError, match=r"spec\.x"):
        crd_schema.structural({"type": "object", "properties": {"x": keyword}}, {})


def test_optional_field_is_its_type_and_not_required() -> None:
    sink = crd_schema.structural(
        {
            "type": "object",
            "properties": {
                "s": {"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}], "default": None}
            },
        },
        {"S": {"type": "string", "title": "S", "description": "from the class"}},
    )
    assert sink == {
        "type": "object",
        "properties": {"s": {"type": "string", "description": "from the class"}},
    }
    assert "required" not in sink


def test_exclusive_bounds_become_openapi_flags() -> None:
    assert crd_schema.structural({"type": "number", "exclusiveMinimum": 0}, {}) == {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
    }


def spec_field(path: str) -> dict[str, Any]:
    node: dict[str, Any] = openapi()["properties"]["spec"]
    for name in path.split("."):
        node = node["properties"][name]
    return node


def test_model_bounds_enums_and_patterns_are_carried_over() -> None:
    kafka = "source.kafka"
    assert spec_field(f"{kafka}.topics")["minItems"] == 1
    assert spec_field(f"{kafka}.maxRecordsPerPartition")["minimum"] == 1
    assert spec_field(f"{kafka}.startingOffsets")["enum"] == ["earliest", "latest"]
    assert spec_field(f"{kafka}.onOffsetOutOfRange")["enum"] == ["fail", "earliest"]
    assert spec_field("transform.entrypoint")["pattern"] == r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
    assert spec_field("transform.options")["x-kubernetes-preserve-unknown-fields"] is True
    conf = spec_field("spark.conf")
    assert conf["additionalProperties"] == {"type": "string", "maxLength": 1024}
    assert conf["maxProperties"] == 64
    assert openapi()["properties"]["spec"]["required"] == [
        "image",
        "source",
        "transform",
        "sink",
        "checkpoint",
    ]


def test_defaults_are_the_models() -> None:
    """Every field with a default in the model has the same default in the CRD, and
    objects that the model defaults are defaulted too (so nested defaults apply)."""
    defaults = PipelineSpec.model_validate(
        {
            "image": "i",
            "source": {"kafka": {"bootstrapServers": "k:1", "topics": ["t"]}},
            "transform": {"entrypoint": "m:f"},
            "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
        }
    ).model_dump(mode="json", by_alias=True)
    assert spec_field("restart")["default"] == {}
    for name, value in defaults["restart"].items():
        assert spec_field(f"restart.{name}")["default"] == value
    assert spec_field("source.kafka.maxRecordsPerPartition")["default"] == 50_000
    assert (
        spec_field("trigger.intervalSeconds")["default"] == defaults["trigger"]["intervalSeconds"]
    )
    assert "default" not in spec_field("deadLetter")


def test_status_describes_every_field_and_names_the_phases() -> None:
    """Every status field has a description (``kubectl explain sp.status``) and the
    schema keeps no field it does not describe."""
    status = openapi()["properties"]["status"]
    assert "x-kubernetes-preserve-unknown-fields" not in status
    assert set(status["properties"]) == wire_fields()
    for name, field in status["properties"].items():
        assert field.get("description"), f"status.{name} has no description"
    assert status["properties"]["phase"]["enum"] == [
        "Pending",
        "Starting",
        "Running",
        "Upgrading",
        "Stopping",
        "Suspended",
        "Recovering",
        "Failed",
    ]


def test_names_and_printer_columns() -> None:
    spec = crd.build_crd()["spec"]
    assert spec["names"]["shortNames"][0] == "sp"
    version = spec["versions"][0]
    assert version["subresources"] == {"status": {}}
    shown = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == ["Phase", "Epoch", "Image", "Last Commit", "Lag", "Age"]


def test_main_prints_the_yaml() -> None:
    printed: list[str] = []
    assert crd.main([], out=printed.append) == 0
    assert yaml.safe_load(printed[0]) == crd.build_crd()


def test_every_value_a_tenant_writes_is_bounded_by_the_crd() -> None:
    """A manifest is a tenant's input to a shared operator and driver: every string has
    a maximum length, every list and map a maximum size, every integer a maximum, so
    nothing unbounded reaches a pod's environment or the checkpoint store."""
    unbounded = []
    for path, node in crd_schema.walk(crd.spec_schema(), "spec"):
        kind = node.get("type")
        if kind == "string" and "maxLength" not in node and "enum" not in node:
            unbounded.append(f"{path}: maxLength")
        elif kind == "array" and "maxItems" not in node:
            unbounded.append(f"{path}: maxItems")
        elif kind == "integer" and "maximum" not in node:
            unbounded.append(f"{path}: maximum")
        elif kind == "object" and "properties" not in node and "maxProperties" not in node:
            unbounded.append(f"{path}: maxProperties")
    assert unbounded == []


def test_free_form_options_are_refused_beyond_64_kib() -> None:
    spec = {
        "image": "job:1",
        "source": {"kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}},
        "transform": {"entrypoint": "m:f", "options": {"blob": "x" * 70_000}},
        "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
    }
    with pytest.raises(ValueError, match=r"transform.options is \d+ bytes as JSON"):
        PipelineSpec.model_validate(spec)
    spec["transform"]["options"] = {"blob": "x" * 60_000}
    assert PipelineSpec.model_validate(spec).transform.options["blob"] == "x" * 60_000
