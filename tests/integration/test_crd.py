"""The StreamingPipeline CRD on the real kube-apiserver: the manifest a user writes is
accepted and read back with the model's defaults filled in; bad manifests are rejected
by the API server itself, before any Sluice code runs, with the field named; ``kubectl
explain`` documents the fields; the status subresource takes what the operator writes.

The CRD is cluster-wide and shared with other tests: it is applied once per session
(server-side apply, idempotent) and left installed.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest
import yaml
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from sluice_api.spec import PipelineSpec
from sluice_dev.paths import Layout
from sluice_dev.servers import kube
from sluice_operator import crd, naming
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

MERGE_PATCH = "application/merge-patch+json"

# The manifest of docs/design.md's example (examples/kpi-pipeline.yaml's shape).
EXAMPLE: dict[str, Any] = yaml.safe_load(
    """
    image: ghcr.io/sluice-dev/sluice-job:0.1.0
    source:
      kafka:
        bootstrapServers: kafka:9092
        topics: [ui-events]
        startingOffsets: earliest
        maxRecordsPerPartition: 50000
        onOffsetOutOfRange: fail
        security:
          protocol: SASL_SSL
          sasl: {mechanism: SCRAM-SHA-512, credentialsSecret: kafka-sasl}
          tls: {caSecret: kafka-ca}
    transform:
      entrypoint: sluice_job.examples.kpi:transform
      options: {windowSeconds: 60}
    sink:
      cassandra: {contactPoints: ["cassandra:9042"], keyspace: analytics, table: page_kpis,
                  credentialsSecret: cassandra-creds}
    deadLetter:
      kafka: {topic: ui-events-dlq}
    checkpoint:
      cassandra: {contactPoints: ["cassandra:9042"], keyspace: sluice,
                  credentialsSecret: cassandra-creds}
    trigger: {intervalSeconds: 5}
    spark:
      driver: {cores: 1, memory: 2g}
      executors: {instances: 2, cores: 1, memory: 2g}
      conf: {}
    upgrade: {stopTimeoutSeconds: 120}
    failover: {nodeLostSeconds: 45}
    restart: {backoffSeconds: 10, maxBackoffSeconds: 300, maxFailures: 5}
    suspend: false
    """
)

STATE: dict[str, Any] = {
    "name": "totals",
    "table": "page_totals",
    "key": [{"name": "page", "type": "text"}],
    "columns": [{"name": "views", "type": "bigint"}],
}

WINDOWED: dict[str, Any] = {
    "key": [{"name": "page", "type": "text"}, {"name": "at", "type": "timestamp"}],
    "window": {"start": "at", "sizeSeconds": 60},
}

MINIMAL: dict[str, Any] = {
    "image": "local/sluice-job:1",
    "source": {"kafka": {"bootstrapServers": "kafka:9092", "topics": ["events"]}},
    "transform": {"entrypoint": "sluice_job.examples.events:transform"},
    "sink": {"datastore": {"project": "demo", "kind": "Event"}},
    "checkpoint": {"cassandra": {"contactPoints": ["cassandra"]}},
}


def kubectl(layout: Layout, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(kube.kubectl(layout)), f"--kubeconfig={layout.kubeconfig}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@dataclass(frozen=True)
class Rejection:
    code: int
    message: str
    fields: frozenset[str]


@dataclass(frozen=True)
class Pipelines:
    """StreamingPipelines of one namespace, through the API server's REST API."""

    api: CustomObjectsApi
    namespace: str

    def _where(self) -> tuple[str, str, str, str]:
        return naming.GROUP, naming.VERSION, self.namespace, naming.PLURAL

    def listed(self) -> bool:
        """Whether the resource is served yet: right after Established the API server
        answers 404, then 429 while the resource's storage initializes."""
        try:
            self.api.list_namespaced_custom_object(*self._where())
        except ApiException as err:
            if err.status in (404, 429):
                return False
            raise
        return True

    def create(self, spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
        body = {
            "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
            "kind": naming.KIND,
            "metadata": {"name": name},
            "spec": spec,
        }
        # Strict, as kubectl is by default: unknown fields are errors, not dropped.
        created = self.api.create_namespaced_custom_object(
            *self._where(), body, field_validation="Strict"
        )
        return cast(dict[str, Any], created)

    def names(self) -> list[str]:
        listed = cast(dict[str, Any], self.api.list_namespaced_custom_object(*self._where()))
        return [item["metadata"]["name"] for item in listed["items"]]

    def get(self, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.api.get_namespaced_custom_object(*self._where(), name))

    def patch(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        method = (
            self.api.patch_namespaced_custom_object_status
            if status
            else self.api.patch_namespaced_custom_object
        )
        patched = method(*self._where(), name, patch, _content_type=MERGE_PATCH)
        return cast(dict[str, Any], patched)

    def rejection(self, call: Callable[[], object]) -> Rejection:
        with pytest.raises(ApiException) as raised:
            call()
        status = json.loads(raised.value.body or "{}")
        causes = status.get("details", {}).get("causes", [])
        fields = frozenset(cause.get("field", "") for cause in causes)
        return Rejection(raised.value.status, status["message"], fields)


@pytest.fixture
def pipelines(sluice_crd: str, custom: CustomObjectsApi, namespace: str) -> Pipelines:
    result = Pipelines(custom, namespace)
    wait_for(result.listed, timeout=60, what=f"{naming.PLURAL} to be served in {namespace}")
    return result


def test_the_design_example_is_accepted_and_read_back(pipelines: Pipelines) -> None:
    pipelines.create(EXAMPLE, name="page-kpis")

    read = pipelines.get("page-kpis")

    assert read["kind"] == naming.KIND
    assert written_as_sent(EXAMPLE, read["spec"]), read["spec"]
    assert PipelineSpec.model_validate(read["spec"]) == PipelineSpec.model_validate(EXAMPLE)


def test_a_low_latency_pipeline_is_accepted(pipelines: Pipelines) -> None:
    low = changed("trigger", {"mode": "LowLatency", "intervalSeconds": 0})
    pipelines.create(low, name="low-latency")

    read = pipelines.get("low-latency")["spec"]

    assert read["trigger"]["mode"] == "LowLatency"
    assert PipelineSpec.model_validate(read).trigger.low_latency


def written_as_sent(sent: Any, read: Any) -> bool:
    """Whether every field of ``sent`` reads back unchanged (defaults may be added)."""
    if isinstance(sent, dict):
        return isinstance(read, dict) and all(
            key in read and written_as_sent(value, read[key]) for key, value in sent.items()
        )
    return bool(sent == read)


def test_the_api_server_fills_in_the_models_defaults(pipelines: Pipelines) -> None:
    """What ``kubectl get -o yaml`` shows, and what the operator reads, is the spec the
    driver will run with: the API server's defaults are the model's."""
    pipelines.create(MINIMAL, name="minimal")

    read = pipelines.get("minimal")["spec"]

    model = PipelineSpec.model_validate(MINIMAL).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    assert read == model


# -- rejected manifests -----------------------------------------------------------------


def changed(path: str, value: Any, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of the example (or ``spec``) with ``path`` set to ``value``."""
    result = copy.deepcopy(EXAMPLE if spec is None else spec)
    *parents, last = path.split(".")
    node = result
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return result


def without(path: str) -> dict[str, Any]:
    result = copy.deepcopy(EXAMPLE)
    *parents, last = path.split(".")
    node = result
    for key in parents:
        node = node[key]
    del node[last]
    return result


@dataclass(frozen=True)
class Invalid:
    spec: dict[str, Any]
    field: str
    says: str
    name: str = "bad"
    model_rejects: bool = True
    """Whether the driver's own model rejects it too (else only the CRD knows)."""


TWO_SINKS = changed("sink.datastore", {"project": "p", "kind": "K"})
PUBSUB = {"project": "my-project", "subscription": "ui-events-sub"}
PUBSUB_ONLY = {
    key: value
    for key, value in changed("source", {"pubsub": PUBSUB}).items()
    if key != "deadLetter"
}
INVALID = {
    "two-sources": Invalid(
        changed("source.pubsub", PUBSUB),
        "spec.source",
        "set exactly one of source.kafka or source.pubsub",
    ),
    "no-source": Invalid(
        changed("source", {}), "spec.source", "set exactly one of source.kafka or source.pubsub"
    ),
    "pubsub-subscription-name": Invalid(
        changed("source", {"pubsub": {**PUBSUB, "subscription": "1-sub"}}, PUBSUB_ONLY),
        "spec.source.pubsub.subscription",
        "should match",
    ),
    "pubsub-reset": Invalid(
        changed("offsetReset", {"id": "r1", "to": "Earliest"}, PUBSUB_ONLY),
        "spec.offsetReset",
        "offsetReset needs source.kafka",
    ),
    "pubsub-dead-letter-brokers": Invalid(
        changed("deadLetter", {"kafka": {"topic": "dlq"}}, PUBSUB_ONLY),
        "spec.deadLetter.kafka.bootstrapServers",
        "required with a Pub/Sub source",
    ),
    "pubsub-dead-letter-with-kafka": Invalid(
        changed("deadLetter", {"pubsub": {"topic": "dlq"}}),
        "spec.deadLetter.pubsub",
        "deadLetter.pubsub needs source.pubsub",
    ),
    "no-topics": Invalid(
        changed("source.kafka.topics", []), "spec.source.kafka.topics", "at least 1 items"
    ),
    "topics-missing": Invalid(
        without("source.kafka.topics"), "spec.source.kafka.topics", "Required value"
    ),
    "duplicate-topic": Invalid(
        changed("source.kafka.topics", ["a", "a"]),
        "spec.source.kafka.topics[1]",
        "Duplicate value",
        model_rejects=False,
    ),
    "topic-name": Invalid(
        changed("source.kafka.topics", ["ui events"]), "spec.source.kafka.topics[0]", "should match"
    ),
    "cap-zero": Invalid(
        changed("source.kafka.maxRecordsPerPartition", 0),
        "spec.source.kafka.maxRecordsPerPartition",
        "should be greater than or equal to 1",
    ),
    "cap-not-a-number": Invalid(
        changed("source.kafka.maxRecordsPerPartition", "lots"),
        "spec.source.kafka.maxRecordsPerPartition",
        "must be of type integer",
    ),
    "starting-offsets": Invalid(
        changed("source.kafka.startingOffsets", "newest"),
        "spec.source.kafka.startingOffsets",
        'Unsupported value: "newest"',
    ),
    "offset-out-of-range": Invalid(
        changed("source.kafka.onOffsetOutOfRange", "skip"),
        "spec.source.kafka.onOffsetOutOfRange",
        'Unsupported value: "skip"',
    ),
    "secret-name": Invalid(
        changed("sink.cassandra.credentialsSecret", "Cassandra_Creds"),
        "spec.sink.cassandra.credentialsSecret",
        "should match",
    ),
    "kafka-sasl-without-credentials": Invalid(
        changed("source.kafka.security", {"protocol": "SASL_SSL"}),
        "spec.source.kafka.security.sasl",
        "security.sasl (credentialsSecret and mechanism) is set exactly when",
    ),
    "kafka-sasl-on-plaintext": Invalid(
        changed("source.kafka.security", {"sasl": {"credentialsSecret": "kafka-sasl"}}),
        "spec.source.kafka.security.sasl",
        "security.sasl (credentialsSecret and mechanism) is set exactly when",
    ),
    "kafka-tls-on-sasl-plaintext": Invalid(
        changed(
            "deadLetter.kafka.security",
            {
                "protocol": "SASL_PLAINTEXT",
                "sasl": {"credentialsSecret": "dlq"},
                "tls": {"caSecret": "ca"},
            },
        ),
        "spec.deadLetter.kafka.security.tls",
        "security.tls is set only when security.protocol is SSL or SASL_SSL",
    ),
    "kafka-mechanism": Invalid(
        changed("source.kafka.security.sasl.mechanism", "GSSAPI"),
        "spec.source.kafka.security.sasl.mechanism",
        'Unsupported value: "GSSAPI"',
    ),
    "service-account-with-executors": Invalid(
        changed("spark.pod", {"serviceAccountName": "datastore-writer"}),
        "spec.spark.pod.serviceAccountName",
        "spark.pod.serviceAccountName is for drivers without executors",
    ),
    "cpu-limit": Invalid(
        changed("spark.driver.cpuLimit", "two"), "spec.spark.driver.cpuLimit", "should match"
    ),
    "node-affinity-in-without-values": Invalid(
        changed(
            "spark.driver.affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In"}]}
                        ]
                    }
                }
            },
        ),
        "spec.spark.driver.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0]",
        "In and NotIn take values",
    ),
    "node-affinity-gt-not-a-number": Invalid(
        changed(
            "spark.driver.affinity",
            {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "gen", "operator": "Gt", "values": ["new"]}
                                ]
                            },
                        }
                    ]
                }
            },
        ),
        "spec.spark.driver.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        "[0].preference.matchExpressions[0]",
        "Gt and Lt take one integer",
    ),
    "pod-anti-affinity-operator": Invalid(
        changed(
            "spark.driver.affinity",
            {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "team", "operator": "Gt", "values": ["1"]}
                                ]
                            },
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            },
        ),
        "spec.spark.driver.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        "[0].labelSelector.matchExpressions[0].operator",
        "should match",
    ),
    "pod-affinity-not-offered": Invalid(
        changed("spark.driver.affinity", {"podAffinity": {}}),
        "spec.spark.driver.affinity",
        'unknown field "spec.spark.driver.affinity.podAffinity"',
    ),
    "cassandra-tls-secret-name": Invalid(
        changed("checkpoint.cassandra.tls", {"caSecret": "CA Bundle"}),
        "spec.checkpoint.cassandra.tls.caSecret",
        "should match",
    ),
    "backpressure-utilization": Invalid(
        changed("source.kafka.backpressure", {"targetUtilization": 0}),
        "spec.source.kafka.backpressure.targetUtilization",
        "should be greater than 0",
    ),
    "backpressure-without-interval": Invalid(
        changed(
            "trigger.intervalSeconds", 0, changed("source.kafka.backpressure", {"enabled": True})
        ),
        "spec.trigger.intervalSeconds",
        "needs trigger.intervalSeconds > 0",
    ),
    "low-latency-with-an-interval": Invalid(
        changed("trigger", {"mode": "LowLatency", "intervalSeconds": 1}),
        "spec.trigger.intervalSeconds",
        "trigger.mode LowLatency needs trigger.intervalSeconds: 0",
    ),
    "low-latency-pubsub": Invalid(
        changed("trigger", {"mode": "LowLatency", "intervalSeconds": 0}, PUBSUB_ONLY),
        "spec.trigger.mode",
        "trigger.mode LowLatency needs source.kafka",
    ),
    "low-latency-mode-unknown": Invalid(
        changed("trigger", {"mode": "Fast", "intervalSeconds": 0}),
        "spec.trigger.mode",
        "supported values",
    ),
    "image-empty": Invalid(changed("image", ""), "spec.image", "at least 1 chars long"),
    "image-whitespace": Invalid(
        changed("image", "ghcr.io/sluice-dev/sluice-job:0.1.0 "),
        "spec.image",
        "image must not contain whitespace",
    ),
    "image-missing": Invalid(without("image"), "spec.image", "Required value"),
    "negative-trigger": Invalid(
        changed("trigger.intervalSeconds", -1),
        "spec.trigger.intervalSeconds",
        "should be greater than or equal to 0",
    ),
    "driver-memory": Invalid(
        changed("spark.driver.memory", "2 gigs"), "spec.spark.driver.memory", "should match"
    ),
    "executor-instances": Invalid(
        changed("spark.executors.instances", -1),
        "spec.spark.executors.instances",
        "should be greater than or equal to 0",
    ),
    "spark-conf-key": Invalid(
        changed("spark.conf", {"sql.shuffle.partitions": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-master": Invalid(
        changed("spark.conf", {"spark.master": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-service-account": Invalid(
        changed("spark.conf", {"spark.kubernetes.authenticate.driver.serviceAccountName": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-secret": Invalid(
        changed("spark.conf", {"spark.kubernetes.driver.secrets.db-password": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-host-path": Invalid(
        changed("spark.conf", {"spark.kubernetes.executor.volumes.hostPath.root.mount.path": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-packages": Invalid(
        changed("spark.conf", {"spark.jars.packages": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-jars": Invalid(
        changed("spark.conf", {"spark.jars": "https://evil.example/x.jar"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-executor-service-account": Invalid(
        changed("spark.conf", {"spark.kubernetes.authenticate.executor.serviceAccountName": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-executor-secret": Invalid(
        changed("spark.conf", {"spark.kubernetes.executor.secrets.db-password": "/s"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-secret-env": Invalid(
        changed("spark.conf", {"spark.kubernetes.driver.secretKeyRef.PW": "db:password"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-driver-host-path": Invalid(
        changed("spark.conf", {"spark.kubernetes.driver.volumes.hostPath.root.mount.path": "/h"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-pod-template": Invalid(
        changed("spark.conf", {"spark.kubernetes.executor.podTemplateFile": "/t.yaml"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-executor-java-options": Invalid(
        changed("spark.conf", {"spark.executor.extraJavaOptions": "-javaagent:/a.jar"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-plugins": Invalid(
        changed("spark.conf", {"spark.plugins": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-java-options": Invalid(
        changed("spark.conf", {"spark.driver.extraJavaOptions": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-extensions": Invalid(
        changed("spark.conf", {"spark.sql.extensions": "x"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    # Issue 38, finding 8: the API server accepted both, each a class Spark would load.
    "spark-conf-class": Invalid(
        changed("spark.conf", {"spark.sql.adaptive.customCostEvaluatorClass": "com.x.Evil"}),
        "spec.spark.conf",
        "spark.conf may set only the tuning settings",
    ),
    "spark-conf-codec-class": Invalid(
        changed("spark.conf", {"spark.io.compression.codec": "com.x.EvilCodec"}),
        "spec.spark.conf",
        "spark.io.compression.codec may be lz4, lzf, snappy, zstd, not com.x.EvilCodec",
    ),
    "two-sinks": Invalid(
        TWO_SINKS, "spec.sink", "set exactly one of sink.cassandra or sink.datastore"
    ),
    "no-sink": Invalid(
        changed("sink", {}), "spec.sink", "set exactly one of sink.cassandra or sink.datastore"
    ),
    "sink-missing": Invalid(without("sink"), "spec.sink", "Required value"),
    "sink-contact-point": Invalid(
        changed("sink.cassandra.contactPoints", ["cassandra:9042:1"]),
        "spec.sink.cassandra.contactPoints[0]",
        "should match",
    ),
    "datastore-project-missing": Invalid(
        changed("sink", {"datastore": {"kind": "K"}}),
        "spec.sink.datastore.project",
        "Required value",
    ),
    "backoff-above-max": Invalid(
        changed("restart", {"backoffSeconds": 600, "maxBackoffSeconds": 300}),
        "spec.restart.maxBackoffSeconds",
        "must be at least restart.backoffSeconds",
        model_rejects=False,
    ),
    "backoff-above-default-max": Invalid(
        changed("restart", {"backoffSeconds": 600}),
        "spec.restart.maxBackoffSeconds",
        "must be at least restart.backoffSeconds",
        model_rejects=False,
    ),
    "two-standbys": Invalid(
        changed("standby", 2), "spec.standby", "should be less than or equal to 1"
    ),
    "stop-timeout": Invalid(
        changed("upgrade.stopTimeoutSeconds", 1),
        "spec.upgrade.stopTimeoutSeconds",
        "should be greater than or equal to 5",
    ),
    "checkpoint-missing": Invalid(without("checkpoint"), "spec.checkpoint", "Required value"),
    "checkpoint-keyspace": Invalid(
        changed("checkpoint.cassandra.keyspace", "sluice-ks"),
        "spec.checkpoint.cassandra.keyspace",
        "should match",
    ),
    "create-keyspace-without-replication": Invalid(
        changed("checkpoint.cassandra.createKeyspace", True),
        "spec.checkpoint.cassandra.replication",
        "createKeyspace needs checkpoint.cassandra.replication",
    ),
    "simple-strategy-without-factor": Invalid(
        changed("checkpoint.cassandra.replication", {"strategy": "SimpleStrategy"}),
        "spec.checkpoint.cassandra.replication",
        "SimpleStrategy takes replicationFactor",
    ),
    "entrypoint": Invalid(
        changed("transform.entrypoint", "sluice_job.examples.kpi.transform"),
        "spec.transform.entrypoint",
        "should match",
    ),
    "option-from-two-secrets": Invalid(
        changed(
            "transform.optionsFrom",
            [
                {"option": "token", "secret": "a", "key": "k"},
                {"option": "token", "secret": "b", "key": "k"},
            ],
        ),
        "spec.transform.optionsFrom[1]",
        "Duplicate value",
    ),
    "option-name": Invalid(
        changed("transform.optionsFrom", [{"option": "a b", "secret": "s", "key": "k"}]),
        "spec.transform.optionsFrom[0].option",
        "should match",
    ),
    "state-column-twice": Invalid(
        changed("transform.state", [STATE | {"columns": [{"name": "PAGE", "type": "int"}]}]),
        "spec.transform.state[0]",
        "each column of a state (key and columns) is named once",
    ),
    "state-column-reserved": Invalid(
        changed(
            "transform.state", [STATE | {"columns": [{"name": "sluice_version", "type": "int"}]}]
        ),
        "spec.transform.state[0]",
        "are the driver's own",
    ),
    "state-declared-twice": Invalid(
        changed("transform.state", [STATE, STATE | {"table": "other"}]),
        "spec.transform.state[1]",
        "Duplicate value",
    ),
    "state-table-twice": Invalid(
        changed("transform.state", [STATE, STATE | {"name": "other"}]),
        "spec.transform.state",
        "each transform.state table is declared once",
    ),
    "state-without-key": Invalid(
        changed("transform.state", [STATE | {"key": []}]),
        "spec.transform.state[0].key",
        "should have at least 1 items",
    ),
    "state-revision-without-migrate": Invalid(
        changed("transform.state", [STATE | {"revision": 2}]),
        "spec.transform.state[0].migrate",
        "revision above 1 needs migrate",
    ),
    "state-window-start-not-a-timestamp-key": Invalid(
        changed(
            "transform",
            {
                "entrypoint": "m:f",
                "eventTime": {},
                "state": [STATE | {"window": {"start": "page", "sizeSeconds": 60}}],
            },
        ),
        "spec.transform.state[0].window.start",
        "window.start must be a key column of type timestamp",
    ),
    "state-window-slide": Invalid(
        changed(
            "transform",
            {
                "entrypoint": "m:f",
                "eventTime": {},
                "state": [
                    STATE
                    | WINDOWED
                    | {"window": {"start": "at", "sizeSeconds": 60, "slideSeconds": 25}}
                ],
            },
        ),
        "spec.transform.state[0].window.slideSeconds",
        "window.slideSeconds must divide window.sizeSeconds",
    ),
    "state-window-without-event-time": Invalid(
        changed("transform.state", [STATE | WINDOWED]),
        "spec.transform.eventTime",
        "closes by the event-time watermark",
    ),
    "state-session-without-event-time": Invalid(
        changed("transform.state", [STATE | {"session": {"gapSeconds": 1800}}]),
        "spec.transform.eventTime",
        "closes by the event-time watermark",
    ),
    "state-window-and-session": Invalid(
        changed(
            "transform",
            {
                "entrypoint": "m:f",
                "eventTime": {},
                "state": [STATE | WINDOWED | {"session": {"gapSeconds": 1800}}],
            },
        ),
        "spec.transform.state[0].session",
        "not both",
    ),
    "state-session-gap": Invalid(
        changed(
            "transform",
            {
                "entrypoint": "m:f",
                "eventTime": {},
                "state": [STATE | {"session": {"gapSeconds": 0}}],
            },
        ),
        "spec.transform.state[0].session.gapSeconds",
        "should be greater than or equal to 1",
    ),
    "state-type": Invalid(
        changed("transform.state", [STATE | {"columns": [{"name": "n", "type": "big int!"}]}]),
        "spec.transform.state[0].columns[0].type",
        "should match",
    ),
    "dead-letter-loop": Invalid(
        changed("deadLetter.kafka.topic", "ui-events"),
        "spec.deadLetter.kafka.topic",
        "rejected records would be read again",
    ),
    "reset-timestamp-missing": Invalid(
        changed("offsetReset", {"id": "r1", "to": "Timestamp"}),
        "spec.offsetReset.timestamp",
        "offsetReset.timestamp is set exactly when offsetReset.to is Timestamp",
    ),
    "reset-timestamp-format": Invalid(
        changed("offsetReset", {"id": "r1", "to": "Timestamp", "timestamp": "yesterday"}),
        "spec.offsetReset.timestamp",
        "date-time",
    ),
    "reset-offsets-missing": Invalid(
        changed("offsetReset", {"id": "r1", "to": "Offsets"}),
        "spec.offsetReset.offsets",
        "offsetReset.offsets is set exactly when offsetReset.to is Offsets",
    ),
    "reset-unknown-topic": Invalid(
        changed(
            "offsetReset",
            {"id": "r1", "to": "Offsets", "offsets": [{"topic": "x", "partition": 0, "offset": 1}]},
        ),
        "spec.offsetReset.offsets",
        "offsetReset.offsets names a topic not in source.kafka.topics",
    ),
    "reset-partition-twice": Invalid(
        changed(
            "offsetReset",
            {
                "id": "r1",
                "to": "Offsets",
                "offsets": [{"topic": "ui-events", "partition": 0, "offset": o} for o in (1, 2)],
            },
        ),
        "spec.offsetReset.offsets[1]",
        "Duplicate value",
    ),
    "pod-env-reserved": Invalid(
        changed("spark.pod", {"env": [{"name": "SLUICE_CONFIG", "value": "{}"}]}),
        "spec.spark.pod.env[0].name",
        "spark.pod.env may not set SLUICE_CONFIG",
    ),
    # Issue 38, finding 4: the API server accepted these two, each a way to load code
    # the image does not hold (a -javaagent: from a mounted ConfigMap, a shared object).
    "pod-env-java-tool-options": Invalid(
        changed("spark.pod", {"env": [{"name": "JAVA_TOOL_OPTIONS", "value": "-javaagent:/x"}]}),
        "spec.spark.pod.env[0].name",
        "spark.pod.env may not set JAVA_TOOL_OPTIONS",
    ),
    "pod-env-ld-preload": Invalid(
        changed("spark.pod", {"env": [{"name": "LD_PRELOAD", "value": "/etc/x/x.so"}]}),
        "spec.spark.pod.env[0].name",
        "spark.pod.env may not set LD_PRELOAD",
    ),
    "pod-env-from-reserved-prefix": Invalid(
        changed("spark.pod", {"envFrom": [{"prefix": "SLUICE_", "configMapRef": {"name": "c"}}]}),
        "spec.spark.pod.envFrom[0].prefix",
        "spark.pod.envFrom prefix SLUICE_ can make a reserved name",
    ),
    "pod-env-value-and-from": Invalid(
        changed(
            "spark.pod",
            {
                "env": [
                    {
                        "name": "TOKEN",
                        "value": "x",
                        "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                    }
                ]
            },
        ),
        "spec.spark.pod.env[0]",
        "set value or valueFrom, not both",
    ),
    "pod-env-from-nothing": Invalid(
        changed("spark.pod", {"envFrom": [{"prefix": "X_"}]}),
        "spec.spark.pod.envFrom[0]",
        "exactly one of configMapRef or secretRef",
    ),
    "pod-host-path": Invalid(
        changed("spark.pod", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
        "spec.spark.pod.volumes[0].hostPath",
        "unknown field",
    ),
    "pod-privileged": Invalid(
        changed("spark.pod", {"securityContext": {"privileged": True, "runAsUser": 0}}),
        "spec.spark.pod.securityContext",
        "unknown field",
    ),
    "pod-host-network": Invalid(
        changed("spark.pod", {"hostNetwork": True}),
        "spec.spark.pod.hostNetwork",
        "unknown field",
    ),
    "pod-host-pid": Invalid(
        changed("spark.pod", {"hostPID": True, "hostIPC": True}),
        "spec.spark.pod.hostPID",
        "unknown field",
    ),
    "pod-token": Invalid(
        changed("spark.pod", {"automountServiceAccountToken": True}),
        "spec.spark.pod.automountServiceAccountToken",
        "unknown field",
    ),
    "pod-node-name": Invalid(
        changed("spark.pod", {"nodeName": "control-plane"}),
        "spec.spark.pod.nodeName",
        "unknown field",
    ),
    "pod-volume-two-sources": Invalid(
        changed(
            "spark.pod",
            {"volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]},
        ),
        "spec.spark.pod.volumes[0]",
        "exactly one of configMap, secret, emptyDir or persistentVolumeClaim",
    ),
    "pod-mount-unknown-volume": Invalid(
        changed("spark.pod", {"volumeMounts": [{"name": "ca", "mountPath": "/etc/ca"}]}),
        "spec.spark.pod.volumeMounts",
        "names a volume that spark.pod.volumes does not have",
    ),
    "event-log-not-on-a-volume": Invalid(
        changed("spark.eventLog", {"dir": "/var/log/spark-events"}),
        "spec.spark.eventLog.dir",
        "not on a writable volume of spark.pod.volumeMounts",
    ),
    "event-log-on-a-read-only-volume": Invalid(
        changed(
            "spark",
            {
                "eventLog": {"dir": "/events/pipeline"},
                "pod": {
                    "volumes": [{"name": "ev", "persistentVolumeClaim": {"claimName": "ev"}}],
                    "volumeMounts": [{"name": "ev", "mountPath": "/events", "readOnly": True}],
                },
            },
        ),
        "spec.spark.eventLog.dir",
        "not on a writable volume",
    ),
    "event-log-relative": Invalid(
        changed("spark.eventLog", {"dir": "events"}),
        "spec.spark.eventLog.dir",
        "should match",
    ),
    "executor-affinity-operator-without-values": Invalid(
        changed(
            "spark.executors",
            {
                "instances": 2,
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {
                                    "matchExpressions": [{"key": "a", "operator": "In"}]
                                },
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                },
            },
        ),
        "spec.spark.executors.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuring"
        "Execution[0].labelSelector.matchExpressions[0]",
        "In and NotIn take values",
    ),
    "pod-mount-scratch": Invalid(
        changed(
            "spark.pod",
            {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "volumeMounts": [{"name": "v", "mountPath": "/tmp/spark"}],
            },
        ),
        "spec.spark.pod.volumeMounts[0].mountPath",
        "scratch space",
    ),
    # Issue 38, finding 8: the API server accepted //tmp, the scratch space to the runtime.
    "pod-mount-double-slash": Invalid(
        changed(
            "spark.pod",
            {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "volumeMounts": [{"name": "v", "mountPath": "//tmp"}],
            },
        ),
        "spec.spark.pod.volumeMounts[0].mountPath",
        "mountPath //tmp has an empty, dot or dot-dot segment",
    ),
    "pod-mount-etc-hosts": Invalid(
        changed(
            "spark.pod",
            {
                "volumes": [{"name": "v", "configMap": {"name": "hosts"}}],
                "volumeMounts": [{"name": "v", "mountPath": "/etc/hosts", "subPath": "hosts"}],
            },
        ),
        "spec.spark.pod.volumeMounts[0].mountPath",
        "mountPath /etc/hosts is a file the kubelet writes",
    ),
    # Issue 38, finding 6: the API server accepted it; the driver would preempt others.
    "pod-system-priority": Invalid(
        changed("spark.pod", {"priorityClassName": "system-node-critical"}),
        "spec.spark.pod.priorityClassName",
        "spark.pod.priorityClassName system-node-critical: system-* classes belong to the cluster",
    ),
    "pod-secret-path-escapes": Invalid(
        changed(
            "spark.pod",
            {
                "volumes": [
                    {
                        "name": "v",
                        "secret": {"secretName": "s", "items": [{"key": "k", "path": "a/../../x"}]},
                    }
                ]
            },
        ),
        "spec.spark.pod.volumes[0].secret.items[0].path",
        "must not contain '..'",
    ),
    "pod-pull-policy": Invalid(
        changed("spark.pod", {"imagePullPolicy": "Sometimes"}),
        "spec.spark.pod.imagePullPolicy",
        "should match",
    ),
    "pod-label-reserved": Invalid(
        changed("spark.pod", {"labels": {"sluice.dev/pipeline": "other"}}),
        "spec.spark.pod.labels",
        "not sluice.dev/*",
    ),
    "pod-label-key": Invalid(
        changed("spark.pod", {"labels": {"a b": "c"}}),
        "spec.spark.pod.labels",
        "keys are label keys",
    ),
    "pod-label-value": Invalid(
        changed("spark.pod", {"labels": {"team": "a b"}}),
        "spec.spark.pod.labels.team",
        "should match",
    ),
    "pod-volume-twice": Invalid(
        changed("spark.pod", {"volumes": [{"name": "v", "emptyDir": {}}] * 2}),
        "spec.spark.pod.volumes[1]",
        "Duplicate value",
    ),
    "too-many-options": Invalid(
        changed("transform.options", {f"o{i}": i for i in range(65)}),
        "spec.transform.options",
        "must have at most 64 items",
    ),
    "history-ttl-beyond-cassandra": Invalid(
        changed("checkpoint.cassandra.historyTtlSeconds", 630_720_001),
        "spec.checkpoint.cassandra.historyTtlSeconds",
        "should be less than or equal to 630720000",
    ),
    "image-too-long": Invalid(
        changed("image", "registry.example/" + "a" * 600), "spec.image", "Too long"
    ),
    "bootstrap-too-long": Invalid(
        changed("source.kafka.bootstrapServers", "k:9092," * 700),
        "spec.source.kafka.bootstrapServers",
        "Too long",
    ),
    "unknown-field": Invalid({**EXAMPLE, "sourc": {}}, "spec.sourc", 'unknown field "spec.sourc"'),
    "pipeline-name": Invalid(
        EXAMPLE,
        "metadata.name",
        "metadata.name must be a DNS label",
        name="1-pipeline",
        model_rejects=False,
    ),
    "pipeline-name-too-long": Invalid(
        EXAMPLE, "metadata.name", "Too long", name="p" * 46, model_rejects=False
    ),
}


ESCAPES = frozenset(
    {
        *(key for key in INVALID if key.startswith("spark-conf-") and key != "spark-conf-key"),
        "service-account-with-executors",
        "pod-host-path",
        "pod-privileged",
        "pod-host-network",
        "pod-host-pid",
        "pod-token",
        "pod-node-name",
        "pod-env-reserved",
        "pod-env-java-tool-options",
        "pod-env-ld-preload",
        "pod-env-from-reserved-prefix",
        "pod-label-reserved",
        "pod-mount-scratch",
        "pod-mount-double-slash",
        "pod-mount-etc-hosts",
        "pod-system-priority",
        "pod-secret-path-escapes",
    }
)
"""A hostile tenant's escapes (issue item 1 and the pod-setting equivalents):
``pytest -m hostile`` runs them with the rest of the hostile-tenant suite."""


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, id=key, marks=[pytest.mark.hostile] if key in ESCAPES else [])
        for key, case in INVALID.items()
    ],
)
def test_invalid_manifest_is_rejected_naming_the_field(pipelines: Pipelines, case: Invalid) -> None:
    rejected = pipelines.rejection(lambda: pipelines.create(case.spec, name=case.name))

    assert rejected.code in (400, 422), rejected
    assert case.field in rejected.message, rejected.message
    assert case.says in rejected.message, rejected.message
    assert rejected.code == 400 or case.field in rejected.fields, rejected
    assert pipelines.names() == []
    model_rejects = _model_rejects(case.spec)
    verdict = "rejects" if model_rejects else "accepts"
    assert model_rejects == case.model_rejects, (
        f"the driver's model (sluice_api.spec) now {verdict} it: update model_rejects"
    )


def _model_rejects(spec: dict[str, Any]) -> bool:
    try:
        PipelineSpec.model_validate(spec)
    except ValidationError:
        return True
    return False


def test_checkpoint_keyspace_cannot_change(pipelines: Pipelines) -> None:
    """Another keyspace holds none of the committed offsets: the driver would start
    over from startingOffsets, losing or re-reading data."""
    pipelines.create(EXAMPLE, name="keyspace")
    moved = {"spec": {"checkpoint": {"cassandra": {"keyspace": "elsewhere"}}}}

    rejected = pipelines.rejection(lambda: pipelines.patch("keyspace", moved))

    assert rejected.code == 422
    assert "spec.checkpoint.cassandra.keyspace" in rejected.fields, rejected
    assert "immutable" in rejected.message
    pipelines.patch("keyspace", {"spec": {"image": "ghcr.io/sluice-dev/sluice-job:0.2.0"}})


# -- what the operator writes, and what kubectl shows -------------------------------------


def test_status_takes_the_operators_fields_and_bookkeeping(
    pipelines: Pipelines, kube_stack: Layout
) -> None:
    pipelines.create(EXAMPLE, name="page-kpis")
    status = {
        "phase": "Running",
        "epoch": 4,
        "driverPod": "page-kpis-driver-4",
        "image": EXAMPLE["image"],
        "lastCommit": {"batchId": 1812, "time": "2026-11-22T03:00:00Z"},
        "lag": {"records": 350, "time": "2026-11-22T03:00:02Z"},
        "restarts": 1,
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Committing"}],
        "specHash": "0123abcd",
    }

    pipelines.patch("page-kpis", {"status": status}, status=True)

    assert pipelines.get("page-kpis")["status"] == status
    bad_phase = {"status": {"phase": "Sleeping"}}
    rejected = pipelines.rejection(lambda: pipelines.patch("page-kpis", bad_phase, status=True))
    assert "status.phase" in rejected.fields, rejected

    shown = kubectl(kube_stack, "get", "sp", "-n", pipelines.namespace)
    assert shown.returncode == 0, shown.stderr
    header, row = shown.stdout.splitlines()
    assert header.split() == ["NAME", "PHASE", "EPOCH", "IMAGE", "LAST", "COMMIT", "LAG", "AGE"]
    assert row.split()[:4] == ["page-kpis", "Running", "4", EXAMPLE["image"]]
    assert "350" in row.split()[4:], "the Lag column shows the records behind"


def test_kubectl_explain_shows_the_field_descriptions(sluice_crd: str, kube_stack: Layout) -> None:
    kafka = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]["properties"]["source"]["properties"]["kafka"]
    wanted = {
        name: " ".join(field["description"].split()) for name, field in kafka["properties"].items()
    }

    def explained() -> str | None:
        # The OpenAPI document kubectl reads is published a moment after Established.
        shown = kubectl(kube_stack, "explain", f"{naming.PLURAL}.spec.source.kafka")
        return " ".join(shown.stdout.split()) if shown.returncode == 0 else None

    text = wait_for(explained, timeout=60, what="kubectl explain to know the CRD")
    for name, description in wanted.items():
        assert name in text
        assert description in text, f"{name}: {description!r} not in {text!r}"
