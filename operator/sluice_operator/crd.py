"""The StreamingPipeline CustomResourceDefinition, generated from the spec model.

The driver parses its configuration with ``sluice_api.spec.PipelineSpec``; the API
server must accept exactly the manifests that model accepts, and say why it rejects the
others. So the CRD is not written by hand: ``build_crd`` converts the model's JSON
schema into a *structural* OpenAPI v3 schema (the only kind the API server serves;
``crd_schema``) and adds what a JSON schema cannot say: CEL rules across fields and
list semantics (``crd_rules``, ``crd_pod_rules``), the status schema and printer
columns. A purely computational module; ``main`` writes the YAML.

The same file is committed twice: ``crds/`` for ``kubectl apply`` users and the Helm
chart's ``charts/sluice/crds/`` (Helm installs a chart's ``crds/`` before anything
else and never upgrades or deletes them). Regenerate both with ``make crds``, i.e.::

    .venv/bin/python -m sluice_operator.crd --write
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from sluice_api.status import PipelineStatus
from sluice_operator import naming
from sluice_operator.crd_pod_rules import POD_RULES
from sluice_operator.crd_rules import MAP_LISTS, SET_LISTS, SPEC_RULES, Rule
from sluice_operator.crd_schema import (
    Schema,
    SchemaError,
    canonical,
    missing_descriptions,
    model_schema,
    structural,
    walk,
)

SINGULAR: Final = "streamingpipeline"
SHORT_NAMES: Final = ("sp", "spipe")
CATEGORIES: Final = ("sluice",)
NAME: Final = f"{naming.PLURAL}.{naming.GROUP}"
FILE_NAME: Final = f"{NAME}.yaml"
REGENERATE: Final = ".venv/bin/python -m sluice_operator.crd --write"
DESTINATIONS: Final = (Path("crds") / FILE_NAME, Path("charts") / "sluice" / "crds" / FILE_NAME)
"""Where ``--write`` puts the CRD, relative to the repository root: both copies at once,
so the chart's never drifts from the top-level one."""
MAX_PIPELINE_NAME: Final = 45
"""Room for the ``-driver-<epoch>`` suffix of pod names within a 63-character label."""

HEADER: Final = (
    f"# Generated from sluice_api/spec.py by sluice_operator/crd.py; do not edit.\n"
    f"# Regenerate: {REGENERATE}\n"
)


SPEC_DESCRIPTION: Final = (
    "What the pipeline runs: a Kafka or Pub/Sub source read in bounded micro-batches, a user "
    "transform, exactly one idempotent sink, and the Cassandra checkpoint store whose "
    "commits fence older drivers."
)


def _at(schema: Schema, path: str) -> Schema:
    found = dict(walk(schema, "spec")).get(path)
    if found is None:
        raise SchemaError(f"{path}: no such field in the spec model (rule or list type)")
    return found


def spec_schema() -> Schema:
    """The structural schema of ``spec``, with CEL rules and list types added."""
    raw = model_schema()
    result = structural(raw, raw.get("$defs", {}))
    result["description"] = SPEC_DESCRIPTION
    for path, rules in {**SPEC_RULES, **POD_RULES}.items():
        _at(result, path)["x-kubernetes-validations"] = [rule.render() for rule in rules]
    for path in SET_LISTS:
        _at(result, path)["x-kubernetes-list-type"] = "set"
    for path, keys in MAP_LISTS.items():
        _at(result, path)["x-kubernetes-list-type"] = "map"
        _at(result, path)["x-kubernetes-list-map-keys"] = list(keys)
    return result


# -- status ---------------------------------------------------------------------------


def _field(kind: str, description: str, **extra: Any) -> Schema:
    return {"type": kind, "description": description, **extra}


def status_schema() -> Schema:
    """The structural schema of ``status``, from ``sluice_api.status.PipelineStatus``:
    every field the operator writes is described (and nothing else is kept)."""
    raw = PipelineStatus.model_json_schema(by_alias=True)
    result = structural(raw, raw.get("$defs", {}), "status")
    conditions = result["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return result


# -- the CRD --------------------------------------------------------------------------


def metadata_schema() -> Schema:
    """The API server allows rules on ``metadata.name`` only (and no description)."""
    name_rule = Rule(
        "self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "metadata.name must be a DNS label (lower case letters, digits and '-', starting "
        "with a letter): the driver's pod and Service are named after it",
    )
    name = _field(
        "string",
        "Name of the pipeline; its driver pods are named <name>-driver-<epoch>.",
        maxLength=MAX_PIPELINE_NAME,
        **{"x-kubernetes-validations": [name_rule.render()]},
    )
    return {"type": "object", "properties": {"name": name}}


def root_schema() -> Schema:
    return _field(
        "object",
        "A PySpark streaming pipeline from Kafka to one sink, run by the Sluice operator "
        "as exactly one driver pod, with offsets committed after each write.",
        required=["spec"],
        properties={
            "apiVersion": _field("string", "Versioned schema of this object."),
            "kind": _field("string", "REST resource this object represents."),
            "metadata": metadata_schema(),
            "spec": spec_schema(),
            "status": status_schema(),
        },
    )


def _column(name: str, kind: str, path: str, description: str, priority: int = 0) -> Schema:
    column = {"name": name, "type": kind, "jsonPath": path, "description": description}
    return {**column, "priority": priority} if priority else column


def printer_columns() -> list[Schema]:
    """``kubectl get`` columns; priority 1 ones show with ``-o wide``."""
    return [
        _column("Phase", "string", ".status.phase", "Lifecycle phase."),
        _column("Epoch", "integer", ".status.epoch", "Epoch of the current driver."),
        _column("Image", "string", ".status.image", "Job image of the current driver."),
        _column("Last Commit", "date", ".status.lastCommit.time", "Newest committed batch."),
        _column("Lag", "integer", ".status.lag.records", "Records behind Kafka."),
        _column("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
        _column("Batch", "integer", ".status.lastCommit.batchId", "Newest batch id.", 1),
        _column("Driver", "string", ".status.driverPod", "Current driver pod.", 1),
        _column("Restarts", "integer", ".status.restarts", "Restarts after failures.", 1),
        _column("Suspended", "boolean", ".spec.suspend", "Stopped on request.", 1),
        _column(
            "Standby",
            "string",
            ".status.standby.state",
            "The standby driver (warm handover or hot).",
            1,
        ),
    ]


def build_crd() -> Schema:
    """The CustomResourceDefinition, as a plain manifest. Raises ``SchemaError`` when
    the model has a field without a description or a type the CRD cannot express."""
    schema = canonical(root_schema())
    missing = missing_descriptions(schema)
    if missing:
        raise SchemaError(f"fields without a description: {', '.join(missing)}")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME, "labels": {"app.kubernetes.io/part-of": "sluice"}},
        "spec": {
            "group": naming.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": naming.KIND,
                "listKind": f"{naming.KIND}List",
                "plural": naming.PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": list(CATEGORIES),
            },
            "versions": [
                {
                    "name": naming.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer_columns(),
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


# -- YAML -----------------------------------------------------------------------------


def render(crd: Mapping[str, Any]) -> str:
    """The committed file's text: a header, then the manifest in a stable order."""
    return HEADER + yaml.safe_dump(dict(crd), sort_keys=False, width=100, allow_unicode=True)


def main(argv: Sequence[str] | None = None, out: Callable[[str], object] = print) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sluice_operator.crd",
        description="Print the StreamingPipeline CRD generated from the spec model.",
    )
    parser.add_argument(
        "--output", type=Path, action="append", metavar="FILE", help="write FILE (repeatable)"
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"write {' and '.join(map(str, DESTINATIONS))} under --root",
    )
    parser.add_argument(
        "--root", type=Path, default=Path(), metavar="DIR", help="repository root (default: .)"
    )
    args = parser.parse_args(argv)
    text = render(build_crd())
    targets = [*(args.output or ()), *(args.root / d for d in DESTINATIONS if args.write)]
    if not targets:
        out(text.rstrip("\n"))
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
