"""What the spec's JSON schema cannot say, in the CRD's terms: CEL rules across
fields (``x-kubernetes-validations``) and list semantics.

The rules say in CEL what the spec model's validators say in Python (and what only
the API server can check, such as a field that may not change), so the API server
rejects a manifest the driver would refuse, naming the field. The rules of
``spec.spark.pod`` and of the affinities, which mirror ``sluice_api.pod``, are
``crd_pod_rules``. Pure data; ``crd`` puts them in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sluice_api.checkpoint import DATACENTER
from sluice_api.spark_conf import CODEC_KEY, SPARK_CONF_CODECS, SPARK_CONF_KEYS, SPARK_CONF_PREFIXES
from sluice_api.state import RESERVED as STATE_RESERVED
from sluice_operator.crd_schema import Schema


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


def cel_list(values: Iterable[str]) -> str:
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
_CODECS: Final = cel_list(SPARK_CONF_CODECS)

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

_STATE_NAMES: Final = (
    "(self.key.map(c, c.name.lowerAscii())"
    " + (has(self.columns) ? self.columns.map(c, c.name.lowerAscii()) : []))"
)
"""A declared state's column names, lower case (``sluice_api.state.State``)."""
_STATE_TABLE: Final = "(has({s}.keyspace) ? {s}.keyspace : '') + '.' + {s}.table.lowerAscii()"

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
            "!has(self.trigger.mode) || self.trigger.mode != 'LowLatency'"
            " || self.trigger.intervalSeconds == 0.0",
            "trigger.mode LowLatency needs trigger.intervalSeconds: 0: it starts each batch "
            "as soon as the last one commits",
            field_path=".trigger.intervalSeconds",
        ),
        Rule(
            "!has(self.trigger.mode) || self.trigger.mode != 'LowLatency'"
            " || has(self.source.kafka)",
            "trigger.mode LowLatency needs source.kafka: a Pub/Sub pipeline runs in the "
            "Default mode",
            field_path=".trigger.mode",
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
    "spec.transform": (
        Rule(
            "!has(self.state) || self.state.all(s, self.state.filter(t, "
            + _STATE_TABLE.format(s="t")
            + " == "
            + _STATE_TABLE.format(s="s")
            + ").size() == 1)",
            "each transform.state table is declared once",
            field_path=".state",
        ),
        Rule(
            "!has(self.state) || !self.state.exists(s, has(s.window) || has(s.session))"
            " || has(self.eventTime)",
            "a transform.state window or session closes by the event-time watermark: set "
            "transform.eventTime",
            field_path=".eventTime",
        ),
    ),
    "spec.transform.state[]": (
        Rule(
            f"{_STATE_NAMES}.all(n, {_STATE_NAMES}.filter(m, m == n).size() == 1)",
            "each column of a state (key and columns) is named once",
        ),
        Rule(
            f"!{_STATE_NAMES}.exists(n, n in {cel_list(STATE_RESERVED)})",
            f"columns {', '.join(STATE_RESERVED)} are the driver's own: name yours otherwise",
        ),
        Rule(
            "!has(self.window) || self.key.exists(c, c.name.lowerAscii() == "
            "self.window.start.lowerAscii() && c.type == 'timestamp')",
            "window.start must be a key column of type timestamp",
            field_path=".window.start",
        ),
        Rule(
            "!has(self.window) || !has(self.session)",
            "declare a state's window or its session, not both",
            field_path=".session",
        ),
        Rule(
            "!has(self.revision) || self.revision == 1 || has(self.migrate)",
            "a state's revision above 1 needs migrate, the function that reads the rows "
            "older revisions wrote",
            field_path=".migrate",
        ),
    ),
    "spec.transform.state[].window": (
        Rule(
            "!has(self.slideSeconds) || (self.slideSeconds <= self.sizeSeconds"
            " && self.sizeSeconds % self.slideSeconds == 0)",
            "window.slideSeconds must divide window.sizeSeconds",
            field_path=".slideSeconds",
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
    "spec.transform.state": ("name",),
    "spec.offsetReset.offsets": ("topic", "partition"),
    "spec.spark.pod.env": ("name",),
    "spec.spark.pod.volumes": ("name",),
    "spec.spark.pod.volumeMounts": ("mountPath",),
}
