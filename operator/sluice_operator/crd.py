"""The StreamingPipeline CustomResourceDefinition, generated from the spec model.

The driver parses its configuration with ``sluice_api.spec.PipelineSpec``; the API
server must accept exactly the manifests that model accepts, and say why it rejects the
others. So the CRD is not written by hand: ``build_crd`` converts the model's JSON
schema into a *structural* OpenAPI v3 schema (the only kind the API server serves) and
adds what a JSON schema cannot say: CEL rules across fields, list semantics, the status
schema and printer columns. A purely computational module; ``main`` writes the YAML.

The same file is committed twice: ``crds/`` for ``kubectl apply`` users and the Helm
chart's ``charts/sluice/crds/`` (Helm installs a chart's ``crds/`` before anything
else and never upgrades or deletes them). Regenerate both with ``make crds``, i.e.::

    .venv/bin/python -m sluice_operator.crd --write
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from sluice_api import pod
from sluice_api.checkpoint import DATACENTER
from sluice_api.spark_conf import CODEC_KEY, SPARK_CONF_CODECS, SPARK_CONF_KEYS, SPARK_CONF_PREFIXES
from sluice_api.spec import PipelineSpec
from sluice_api.status import PipelineStatus
from sluice_operator import naming

Schema = dict[str, Any]

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


# -- what the JSON schema cannot say ---------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A CEL rule (``x-kubernetes-validations``) of the schema at some spec path."""

    rule: str
    message: str
    field_path: str | None = None
    reason: str | None = None
    message_expression: str | None = None
    """A CEL expression for the message, naming the value (``message`` is the fallback
    when the expression cannot be evaluated)."""

    def render(self) -> Schema:
        result: Schema = {"rule": self.rule, "message": self.message}
        if self.message_expression:
            result["messageExpression"] = self.message_expression
        if self.field_path:
            result["fieldPath"] = self.field_path
        if self.reason:
            result["reason"] = self.reason
        return result


def _cel_list(values: Iterable[str]) -> str:
    """A CEL list literal of strings (none of which holds a quote)."""
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


_SPARK_CONF_ALLOWED: Final = (
    "(key in ["
    + ", ".join(f"'{key}'" for key in sorted(SPARK_CONF_KEYS))
    + "] || "
    + " || ".join(f"key.startsWith('{prefix}')" for prefix in SPARK_CONF_PREFIXES)
    + ") && !key.lowerAscii().contains('class')"
)
"""``sluice_api.spark_conf.spark_conf_allowed`` in CEL."""
_CODECS: Final = _cel_list(SPARK_CONF_CODECS)

_DEAD_LETTER_LOOP: Final = (
    "!has(self.deadLetter) || !has(self.deadLetter.kafka) || !has(self.source.kafka)"
    " || !(self.deadLetter.kafka.topic in self.source.kafka.topics)"
    " || (has(self.deadLetter.kafka.bootstrapServers)"
    " && self.deadLetter.kafka.bootstrapServers != self.source.kafka.bootstrapServers)"
)

_SASL: Final = "has(self.protocol) && self.protocol in ['SASL_PLAINTEXT', 'SASL_SSL']"
_TLS: Final = "has(self.protocol) && self.protocol in ['SSL', 'SASL_SSL']"
_KAFKA_SECURITY_RULES: Final = (
    Rule(
        f"({_SASL}) == has(self.sasl)",
        "security.sasl (credentialsSecret and mechanism) is set exactly when "
        "security.protocol is SASL_PLAINTEXT or SASL_SSL",
        field_path=".sasl",
    ),
    Rule(
        f"!has(self.tls) || ({_TLS})",
        "security.tls is set only when security.protocol is SSL or SASL_SSL",
        field_path=".tls",
    ),
)

SPEC_RULES: Final[Mapping[str, tuple[Rule, ...]]] = {
    "spec": (
        Rule(
            _DEAD_LETTER_LOOP,
            "deadLetter.kafka.topic must not be one of source.kafka.topics: rejected "
            "records would be read again, and rejected again, forever",
            field_path=".deadLetter.kafka.topic",
        ),
        Rule(
            "!has(self.source.kafka) || !has(self.source.kafka.backpressure)"
            " || !has(self.source.kafka.backpressure.enabled)"
            " || !self.source.kafka.backpressure.enabled || self.trigger.intervalSeconds > 0",
            "source.kafka.backpressure.enabled needs trigger.intervalSeconds > 0: the cap is "
            "sized to a fraction of the interval",
            field_path=".trigger.intervalSeconds",
        ),
        Rule(
            "!has(self.offsetReset) || !has(self.offsetReset.offsets) || !has(self.source.kafka)"
            " || self.offsetReset.offsets.all(o, o.topic in self.source.kafka.topics)",
            "offsetReset.offsets names a topic not in source.kafka.topics",
            field_path=".offsetReset.offsets",
        ),
        Rule(
            "!has(self.offsetReset) || has(self.source.kafka)",
            "offsetReset needs source.kafka: a Pub/Sub subscription has no offsets (seek "
            "the subscription instead)",
            field_path=".offsetReset",
        ),
        Rule(
            "!has(self.deadLetter) || !has(self.deadLetter.pubsub) || has(self.source.pubsub)",
            "deadLetter.pubsub needs source.pubsub: use deadLetter.kafka",
            field_path=".deadLetter.pubsub",
        ),
        Rule(
            "!has(self.deadLetter) || !has(self.deadLetter.kafka) || has(self.source.kafka)"
            " || has(self.deadLetter.kafka.bootstrapServers)",
            "deadLetter.kafka.bootstrapServers is required with a Pub/Sub source (there are "
            "no source brokers to default to)",
            field_path=".deadLetter.kafka.bootstrapServers",
        ),
    ),
    "spec.source": (
        Rule(
            "has(self.kafka) != has(self.pubsub)",
            "set exactly one of source.kafka or source.pubsub",
        ),
    ),
    "spec.deadLetter": (
        Rule(
            "has(self.kafka) != has(self.pubsub)",
            "set exactly one of deadLetter.kafka or deadLetter.pubsub",
        ),
    ),
    "spec.offsetReset": (
        Rule(
            "(self.to == 'Timestamp') == has(self.timestamp)",
            "offsetReset.timestamp is set exactly when offsetReset.to is Timestamp",
            field_path=".timestamp",
        ),
        Rule(
            "(self.to == 'Offsets') == (has(self.offsets) && size(self.offsets) > 0)",
            "offsetReset.offsets is set exactly when offsetReset.to is Offsets",
            field_path=".offsets",
        ),
    ),
    "spec.image": (Rule("!self.matches(r'\\s')", "image must not contain whitespace"),),
    "spec.sink": (
        Rule(
            "has(self.cassandra) != has(self.datastore)",
            "set exactly one of sink.cassandra or sink.datastore",
        ),
    ),
    "spec.restart": (
        Rule(
            # has(): the API server checks the default ({}) before nested defaults apply.
            "!has(self.backoffSeconds) || !has(self.maxBackoffSeconds)"
            " || self.maxBackoffSeconds >= self.backoffSeconds",
            "restart.maxBackoffSeconds must be at least restart.backoffSeconds",
            field_path=".maxBackoffSeconds",
        ),
    ),
    "spec.spark.conf": (
        Rule(
            f"self.all(key, {_SPARK_CONF_ALLOWED})",
            "spark.conf may set only the tuning settings docs/tuning.md lists (memory, "
            "parallelism, shuffle, compression, SQL tuning, timeouts, the UI); the master, "
            "identity, pods, volumes, jars, plugins, classes and JVM options are the operator's",
        ),
        Rule(
            f"!('{CODEC_KEY}' in self) || self['{CODEC_KEY}'] in {_CODECS}",
            f"spark.conf {CODEC_KEY} may be {', '.join(SPARK_CONF_CODECS)} (not a class name)",
            message_expression=(
                f"'spark.conf {CODEC_KEY} may be {', '.join(SPARK_CONF_CODECS)}, not ' + "
                f"self['{CODEC_KEY}']"
            ),
        ),
    ),
    "spec.spark": (
        Rule(
            "!has(self.pod) || !has(self.pod.serviceAccountName) || !has(self.executors)"
            " || !has(self.executors.instances) || self.executors.instances == 0",
            "spark.pod.serviceAccountName is for drivers without executors: a driver that "
            "runs executor pods uses the account the operator binds for it",
            field_path=".pod.serviceAccountName",
        ),
        Rule(
            "!has(self.eventLog) || !has(self.eventLog.dir) || !self.eventLog.dir.startsWith('/')"
            " || (has(self.pod) && has(self.pod.volumeMounts) && self.pod.volumeMounts.exists(m,"
            " (!has(m.readOnly) || !m.readOnly) && (self.eventLog.dir == m.mountPath"
            " || self.eventLog.dir.startsWith(m.mountPath.endsWith('/') ? m.mountPath"
            " : m.mountPath + '/'))))",
            "spark.eventLog.dir is not on a writable volume of spark.pod.volumeMounts (the root "
            "filesystem is read-only)",
            field_path=".eventLog.dir",
        ),
    ),
    "spec.source.kafka.security": _KAFKA_SECURITY_RULES,
    "spec.deadLetter.kafka.security": _KAFKA_SECURITY_RULES,
    "spec.checkpoint.cassandra": (
        Rule(
            "!has(self.createKeyspace) || !self.createKeyspace || has(self.replication)",
            "checkpoint.cassandra.createKeyspace needs checkpoint.cassandra.replication "
            "(strategy and replicas)",
            field_path=".replication",
        ),
    ),
    "spec.checkpoint.cassandra.replication": (
        Rule(
            "(has(self.strategy) && self.strategy == 'SimpleStrategy')"
            " ? (has(self.replicationFactor)"
            " && (!has(self.datacenters) || size(self.datacenters) == 0))"
            " : (has(self.datacenters) && size(self.datacenters) > 0"
            " && !has(self.replicationFactor))",
            "SimpleStrategy takes replicationFactor; NetworkTopologyStrategy takes datacenters, "
            "e.g. {dc1: 3}",
        ),
    ),
    "spec.checkpoint.cassandra.replication.datacenters": (
        Rule(
            "self.all(dc, dc.matches('" + DATACENTER + "'))",
            "datacenter names are letters, digits, '-', '_' and '.'",
        ),
    ),
    "spec.checkpoint.cassandra.keyspace": (
        Rule(
            "self == oldSelf",
            "checkpoint.cassandra.keyspace is immutable: a new keyspace holds none of the "
            "committed offsets; create a new pipeline to start over",
            reason="FieldValueForbidden",
        ),
    ),
}

_RESERVED_ENV_PREFIXES: Final = _cel_list(pod.RESERVED_ENV_PREFIXES)
_RESERVED_ENV_NAMES: Final = _cel_list(pod.RESERVED_ENV)
_RESERVED_ENV: Final = (
    f"{_RESERVED_ENV_PREFIXES}.exists(p, self.name.startsWith(p))"
    f" || self.name in {_RESERVED_ENV_NAMES}"
)
_RESERVED_ENV_PREFIX: Final = (
    f"{_RESERVED_ENV_PREFIXES}.exists(p, self.prefix.startsWith(p) || p.startsWith(self.prefix))"
    f" || {_RESERVED_ENV_NAMES}.exists(n, n.startsWith(self.prefix) && n != self.prefix)"
)
"""``pod.reserved_env_prefix`` in CEL."""
_RESERVED_KEY: Final = (
    f"k.startsWith('{pod.RESERVED_LABEL_PREFIX}') || k in ["
    + ", ".join(f"'{k}'" for k in pod.RESERVED_LABELS)
    + "]"
)
_KUBELET_FILES: Final = _cel_list(pod.KUBELET_FILES)
_UP_A_LEVEL: Final = r"!self.matches('(^|/)\\.\\.(/|$)')"

_IN_VALUES: Final = "self.operator in ['In', 'NotIn']"
_NO_VALUES: Final = "(!has(self.values) || size(self.values) == 0)"
_SOME_VALUES: Final = "(has(self.values) && size(self.values) > 0)"
_LABEL_REQUIREMENT: Final = Rule(
    f"({_IN_VALUES}) ? {_SOME_VALUES} : {_NO_VALUES}",
    "In and NotIn take values; Exists and DoesNotExist take none",
)
_NODE_REQUIREMENT: Final = Rule(
    f"({_IN_VALUES}) ? {_SOME_VALUES} : (self.operator in ['Exists', 'DoesNotExist'])"
    f" ? {_NO_VALUES} : (has(self.values) && size(self.values) == 1"
    " && self.values[0].matches('^[0-9]+$'))",
    "In and NotIn take values; Exists and DoesNotExist take none; Gt and Lt take one integer",
)


def _affinity_rules(role: str) -> dict[str, tuple[Rule, ...]]:
    """The operator/values rules of ``spec.spark.<role>.affinity``."""
    node = f"spec.spark.{role}.affinity.nodeAffinity"
    anti = f"spec.spark.{role}.affinity.podAntiAffinity"
    return {
        f"{node}.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[].matchExpressions[]": (_NODE_REQUIREMENT,),
        f"{node}.preferredDuringSchedulingIgnoredDuringExecution[].preference.matchExpressions[]": (
            _NODE_REQUIREMENT,
        ),
        f"{anti}.requiredDuringSchedulingIgnoredDuringExecution[]"
        ".labelSelector.matchExpressions[]": (_LABEL_REQUIREMENT,),
        f"{anti}.preferredDuringSchedulingIgnoredDuringExecution[]"
        ".podAffinityTerm.labelSelector.matchExpressions[]": (_LABEL_REQUIREMENT,),
    }


POD_RULES: Final[Mapping[str, tuple[Rule, ...]]] = {
    **_affinity_rules("driver"),
    **_affinity_rules("executors"),
    "spec.spark.pod": (
        Rule(
            "!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes)"
            " && self.volumes.exists(v, v.name == m.name))",
            "spark.pod.volumeMounts names a volume that spark.pod.volumes does not have",
            field_path=".volumeMounts",
        ),
    ),
    "spec.spark.pod.env[]": (
        Rule(
            f"!({_RESERVED_ENV})",
            f"spark.pod.env may not set a reserved name; reserved are {pod.RESERVED_ENV_TEXT}",
            field_path=".name",
            message_expression=(
                f"'spark.pod.env may not set ' + self.name + '; reserved are "
                f"{pod.RESERVED_ENV_TEXT}'"
            ),
        ),
        Rule(
            "!(has(self.value) && has(self.valueFrom))",
            "set value or valueFrom, not both",
        ),
    ),
    "spec.spark.pod.env[].valueFrom": (
        Rule(
            "has(self.secretKeyRef) != has(self.configMapKeyRef)",
            "valueFrom takes exactly one of secretKeyRef or configMapKeyRef",
        ),
    ),
    "spec.spark.pod.envFrom[]": (
        Rule(
            "has(self.configMapRef) != has(self.secretRef)",
            "envFrom takes exactly one of configMapRef or secretRef",
        ),
        Rule(
            f"!has(self.prefix) || !({_RESERVED_ENV_PREFIX})",
            "spark.pod.envFrom prefix can make a reserved name of a key; "
            f"reserved are {pod.RESERVED_ENV_TEXT}",
            field_path=".prefix",
            message_expression=(
                "'spark.pod.envFrom prefix ' + self.prefix + ' can make a reserved name of a "
                f"key; reserved are {pod.RESERVED_ENV_TEXT}'"
            ),
        ),
    ),
    "spec.spark.pod.volumes[]": (
        Rule(
            "[has(self.configMap), has(self.secret), has(self.emptyDir),"
            " has(self.persistentVolumeClaim)].filter(x, x).size() == 1",
            "a volume takes exactly one of configMap, secret, emptyDir or "
            "persistentVolumeClaim (no hostPath or other node or cluster sources)",
        ),
        Rule(
            f"self.name != '{pod.SCRATCH_VOLUME}'"
            f" && !self.name.startsWith('{pod.SPARK_LOCAL_DIR_VOLUME_PREFIX}')",
            f"volume names '{pod.SCRATCH_VOLUME}' and '{pod.SPARK_LOCAL_DIR_VOLUME_PREFIX}*' "
            "are the pods' own scratch space",
        ),
    ),
    "spec.spark.pod.volumes[].configMap.items[].path": (
        Rule(_UP_A_LEVEL, "path must not contain '..'"),
    ),
    "spec.spark.pod.volumes[].secret.items[].path": (
        Rule(_UP_A_LEVEL, "path must not contain '..'"),
    ),
    "spec.spark.pod.volumeMounts[]": (
        Rule(
            f"!(self.mountPath == '{pod.SCRATCH_MOUNT}' || self.mountPath == "
            f"'{pod.SCRATCH_MOUNT}/' || self.mountPath.startsWith('{pod.SCRATCH_MOUNT}/'))",
            f"{pod.SCRATCH_MOUNT} is the driver's scratch space: mount elsewhere",
            field_path=".mountPath",
        ),
        Rule(
            r"!self.mountPath.matches('//|/\\.\\.?(/|$)')",
            "mountPath has an empty, '.' or '..' segment (//tmp and /./tmp are /tmp)",
            field_path=".mountPath",
            message_expression=(
                "'mountPath ' + self.mountPath + ' has an empty, dot or dot-dot segment'"
            ),
        ),
        Rule(
            f"!({_KUBELET_FILES}.exists(f, self.mountPath == f || self.mountPath == f + '/'))",
            f"mountPath is a file the kubelet writes: {', '.join(pod.KUBELET_FILES)}",
            field_path=".mountPath",
            message_expression="'mountPath ' + self.mountPath + ' is a file the kubelet writes'",
        ),
    ),
    "spec.spark.pod.priorityClassName": (
        Rule(
            f"!self.startsWith('{pod.SYSTEM_PRIORITY_PREFIX}')",
            f"spark.pod.priorityClassName may not be a {pod.SYSTEM_PRIORITY_PREFIX}* class "
            "(the cluster's own)",
            message_expression=(
                f"'spark.pod.priorityClassName ' + self + ': {pod.SYSTEM_PRIORITY_PREFIX}* "
                "classes belong to the cluster'"
            ),
        ),
    ),
    "spec.spark.pod.labels": (
        Rule(
            f"self.all(k, k.matches(r'{pod.LABEL_KEY}') && !({_RESERVED_KEY}))",
            "spark.pod.labels: keys are label keys, not sluice.dev/* or "
            "app.kubernetes.io/{name,instance,managed-by} (the operator's)",
        ),
    ),
    "spec.spark.pod.annotations": (
        Rule(
            f"self.all(k, k.matches(r'{pod.LABEL_KEY}') && !k.startsWith("
            f"'{pod.RESERVED_LABEL_PREFIX}'))",
            "spark.pod.annotations: keys are annotation keys, not sluice.dev/* (the operator's)",
        ),
    ),
}

# Lists whose items must be unique: the API server reports the duplicate by index.
SET_LISTS: Final = (
    "spec.source.kafka.topics",
    "spec.sink.cassandra.contactPoints",
    "spec.checkpoint.cassandra.contactPoints",
    "spec.spark.pod.imagePullSecrets",
)

# Lists of objects keyed by a field: the API server rejects two items with one key.
MAP_LISTS: Final[Mapping[str, tuple[str, ...]]] = {
    "spec.transform.optionsFrom": ("option",),
    "spec.offsetReset.offsets": ("topic", "partition"),
    "spec.spark.pod.env": ("name",),
    "spec.spark.pod.volumes": ("name",),
    "spec.spark.pod.volumeMounts": ("mountPath",),
}

SPEC_DESCRIPTION: Final = (
    "What the pipeline runs: a Kafka or Pub/Sub source read in bounded micro-batches, a user "
    "transform, exactly one idempotent sink, and the Cassandra checkpoint store whose "
    "commits fence older drivers."
)


def _walk(schema: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    """Every schema node under ``schema`` with its dotted path (``[]`` for list items,
    ``[*]`` for map values)."""
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}[*]")


def _at(schema: Schema, path: str) -> Schema:
    found = dict(_walk(schema, "spec")).get(path)
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
        for path, node in _walk(schema, "")
        for name, sub in node.get("properties", {}).items()
        if (path, name) != ("", "metadata") and not str(sub.get("description", "")).strip()
    ]


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
