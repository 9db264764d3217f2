"""The StreamingPipeline ``spec``: one model shared by the driver and the operator.

This is the single source of truth for what a user writes (the manifest; see
``examples/`` and ``docs/design.md``): the driver parses its configuration with it,
the operator validates and builds pods from it, and the CRD's schema is generated
from it. It depends on pydantic only, never on Spark or Kubernetes, so both
processes can import it.

Field names are snake_case in Python and camelCase on the wire (``by_alias``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Self

from pydantic import Field, field_validator, model_validator

from sluice_api.affinity import Affinity
from sluice_api.pod import QUANTITY, PodSettings
from sluice_api.spec_base import K8S_NAME, Model

ENTRYPOINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
MEMORY = r"^[0-9]+[kmgtKMGT]?$"
SCRATCH_DEFAULT: Final = "2Gi"
CASSANDRA_NAME: Final = r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$"
HOST_PORT = r"^[^\s:,]+(:[0-9]{1,5})?$"
CPU = r"^([0-9]{1,4}(\.[0-9]{1,3})?|[0-9]{1,7}m)$"


class StartingOffsets(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"


class OnOffsetOutOfRange(StrEnum):
    FAIL = "fail"
    EARLIEST = "earliest"


class UpgradeMode(StrEnum):
    CLEAN_STOP = "CleanStop"
    """Stop the old driver cleanly, then start the new one (Spark starts in the gap)."""
    WARM_HANDOVER = "WarmHandover"
    """Start the new driver as a standby first; stop the old one once it is ready."""


SecretName = Annotated[
    str, Field(pattern=K8S_NAME, max_length=253, description="Name of a Secret in the namespace.")
]
HostPort = Annotated[str, Field(pattern=HOST_PORT, max_length=261, description="host or host:port")]
BOOTSTRAP_MAX: Final = 4096
CONTACT_POINTS_MAX: Final = 32
CASSANDRA_MAX_TTL: Final = 630_720_000
"""Cassandra refuses a TTL above 20 years: every write with a larger one fails."""
OPTIONS_MAX: Final = 64
OPTIONS_MAX_BYTES: Final = 64 * 1024


class Backpressure(Model):
    """Rate control: the per-partition cap follows how long recent batches took."""

    enabled: bool = Field(
        default=False,
        description=(
            "Shrink or grow the per-partition cap of each micro-batch so that a batch takes "
            "about targetUtilization of trigger.intervalSeconds; never above "
            "maxRecordsPerPartition, never below 1."
        ),
    )
    target_utilization: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="Fraction of the trigger interval a batch should take (0 < x <= 1).",
    )
    initial_records_per_partition: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Cap of the first batch; default: maxRecordsPerPartition.",
    )


class Tls(Model):
    """TLS towards a server: whom to trust and, if the server asks, who the client is."""

    ca_secret: SecretName | None = Field(
        default=None,
        description=(
            "Secret whose key 'ca.crt' holds the PEM certificates that sign the servers' "
            "certificates (a cert-manager Secret has it); default: the image's trusted CAs."
        ),
    )
    client_secret: SecretName | None = Field(
        default=None,
        description=(
            "Secret with keys 'tls.crt' and 'tls.key' (a kubernetes.io/tls Secret, key in "
            "PKCS#8 PEM, unencrypted): the client certificate, for servers that require one."
        ),
    )
    verify_hostname: bool = Field(
        default=True,
        description=(
            "Check that the server's certificate names the address the driver connected "
            "to. Turn off only for servers whose certificates lack their addresses."
        ),
    )


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class KafkaSasl(Model):
    mechanism: SaslMechanism = Field(
        default=SaslMechanism.SCRAM_SHA_512, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."
    )
    credentials_secret: SecretName = Field(
        description="Secret with keys 'username' and 'password' of the SASL user."
    )


class KafkaSecurity(Model):
    """Kafka's ``security.protocol`` and what it needs, for both of the driver's clients
    (the Java client inside Spark, librdkafka for offsets and dead letters)."""

    protocol: SecurityProtocol = Field(
        default=SecurityProtocol.PLAINTEXT,
        description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's security.protocol).",
    )
    sasl: KafkaSasl | None = Field(
        default=None, description="SASL user and mechanism (SASL_PLAINTEXT and SASL_SSL)."
    )
    tls: Tls | None = Field(
        default=None,
        description="CA and client certificate (SSL and SASL_SSL); default: the image's CAs.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        sasl = self.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
        tls = self.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
        if sasl and self.sasl is None:
            raise ValueError(f"protocol {self.protocol.value} needs sasl (credentialsSecret)")
        if not sasl and self.sasl is not None:
            raise ValueError(f"sasl is set but protocol {self.protocol.value} does not use SASL")
        if not tls and self.tls is not None:
            raise ValueError(f"tls is set but protocol {self.protocol.value} does not use TLS")
        return self


class KafkaSource(Model):
    """Where records come from: Kafka topics read by explicit offset ranges."""

    bootstrap_servers: str = Field(
        min_length=1,
        max_length=BOOTSTRAP_MAX,
        description="Comma-separated host:port list of Kafka brokers.",
    )
    topics: list[Annotated[str, Field(pattern=r"^[a-zA-Z0-9._-]{1,249}$", max_length=249)]] = Field(
        min_length=1, max_length=100, description="Topics to read; every partition is read."
    )
    starting_offsets: StartingOffsets = Field(
        default=StartingOffsets.EARLIEST,
        description=(
            "Where a pipeline without a checkpoint starts: earliest or latest. Partitions "
            "that appear later (added to a topic, while running or stopped) always start "
            "at their earliest offset, so none of their records is skipped."
        ),
    )
    max_records_per_partition: int = Field(
        default=50_000,
        ge=1,
        le=10_000_000,
        description="Cap on records read per partition in one micro-batch (bounded catch-up).",
    )
    on_offset_out_of_range: OnOffsetOutOfRange = Field(
        default=OnOffsetOutOfRange.FAIL,
        description=(
            "When retention deleted records past the checkpoint, or the checkpoint is beyond "
            "a partition's end (the topic was deleted and recreated): fail (stop, naming "
            "topic, partition and offsets; nothing is skipped silently) or earliest (skip "
            "to the oldest record, or read a recreated partition from its start: counted in "
            "sluice_records_skipped_total or sluice_offset_resets_total, logged, a "
            "RecordsLost or OffsetOutOfRange condition and Event, and for a planned batch "
            "the lost offsets in its history row; the batch keeps its id and end offsets)."
        ),
    )
    security: KafkaSecurity = Field(
        default_factory=lambda: KafkaSecurity(),
        description="How the driver connects to the brokers: plain, TLS, SASL or both.",
    )
    backpressure: Backpressure = Field(
        default_factory=Backpressure, description="Optional rate control of the per-partition cap."
    )
    commit_to_consumer_group: bool = Field(
        default=False,
        description=(
            "Also commit each batch's positions to the Kafka consumer group "
            "'sluice.<namespace>.<name>' so Kafka's lag tools show the pipeline; only "
            "informative: the driver never reads them back (it resumes from its checkpoint)."
        ),
    )


PUBSUB_PROJECT: Final = r"^[a-z][-a-z0-9.:]{1,99}$"
PUBSUB_NAME: Final = r"^[A-Za-z][-A-Za-z0-9_.~+%]{2,254}$"
"""A topic or subscription id, as Pub/Sub allows it (3 to 255 characters)."""
PUBSUB_MAX_MESSAGE_BYTES: Final = 10 * 1024 * 1024
"""Pub/Sub's limit on one message (data and attributes)."""


class PubSubSource(Model):
    """Where records come from: a Google Cloud Pub/Sub subscription, pulled in bounded
    batches; a message is acknowledged only once its batch is committed."""

    project: str = Field(
        pattern=PUBSUB_PROJECT, max_length=100, description="Google Cloud project id."
    )
    subscription: str = Field(
        pattern=PUBSUB_NAME,
        max_length=255,
        description="Subscription id in the project (a pull subscription).",
    )
    credentials_secret: SecretName | None = Field(
        default=None,
        description=(
            "Secret with key 'credentials.json' (a service-account key); default: "
            "Application Default Credentials (e.g. GKE workload identity)."
        ),
    )
    endpoint: HostPort | None = Field(
        default=None,
        description=(
            "host:port of a Pub/Sub server other than Google's: an emulator (without "
            "credentialsSecret: plaintext, no credentials, as emulators expect) or a "
            "private endpoint (with credentialsSecret: TLS)."
        ),
    )
    max_messages_per_batch: int = Field(
        default=5_000,
        ge=1,
        le=1_000_000,
        description="Cap on messages in one micro-batch (bounded catch-up).",
    )
    max_bytes_per_batch: int = Field(
        default=64 * 1024 * 1024,
        ge=PUBSUB_MAX_MESSAGE_BYTES,
        le=1024 * 1024 * 1024,
        description=(
            "Cap on the bytes of the messages (data and attributes) in one micro-batch; a "
            "message that would cross it waits, leased, for the next batch."
        ),
    )
    ack_deadline_seconds: int = Field(
        default=60,
        ge=10,
        le=600,
        description=(
            "The lease the driver asks for and renews, every third of it, on every "
            "message it holds until the message's batch is committed and acknowledged."
        ),
    )
    dedup_window_seconds: int = Field(
        default=86_400,
        ge=600,
        le=30 * 86_400,
        description=(
            "How long the ids of committed messages are kept (in the checkpoint "
            "keyspace) to drop a redelivery: a message delivered again within it counts "
            "once. It must cover the longest time a pipeline may be down between a "
            "commit and its acknowledgement (docs/pubsub.md)."
        ),
    )


class Source(Model):
    """Exactly one source."""

    kafka: KafkaSource | None = Field(default=None, description="Kafka source.")
    pubsub: PubSubSource | None = Field(default=None, description="Google Cloud Pub/Sub source.")

    @model_validator(mode="after")
    def exactly_one(self) -> Self:
        if (self.kafka is None) == (self.pubsub is None):
            raise ValueError("set exactly one of source.kafka or source.pubsub")
        return self


OPTION_NAME: Final = r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$"


class SecretOption(Model):
    """A transform option whose value is the key of a Secret."""

    option: str = Field(
        pattern=OPTION_NAME,
        max_length=63,
        description="Name of the option, as the transform receives it.",
    )
    secret: SecretName
    key: str = Field(
        pattern=r"^[-._a-zA-Z0-9]{1,253}$",
        max_length=253,
        description="Key of the value in the Secret.",
    )


class Transform(Model):
    """User code: ``module:function(df, options) -> DataFrame | TransformResult``."""

    entrypoint: str = Field(
        pattern=ENTRYPOINT.pattern,
        max_length=512,
        description=(
            "Python 'module:function' taking (DataFrame, options) and returning the rows "
            "for the sink, or a TransformResult(output, rejects) whose rejects go to "
            "deadLetter."
        ),
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        max_length=OPTIONS_MAX,
        description=(
            f"Free-form options passed to the function: at most {OPTIONS_MAX}, "
            f"{OPTIONS_MAX_BYTES // 1024} KiB as JSON."
        ),
    )
    options_from: list[SecretOption] = Field(
        default_factory=list,
        max_length=32,
        description=(
            "Options whose values come from Secrets (passwords, tokens): the driver pod gets "
            "them as secret references, so the values are in neither the manifest nor the "
            "driver's configuration, and the function receives them in options with the "
            "others, as strings."
        ),
    )

    @model_validator(mode="after")
    def each_option_once(self) -> Self:
        names = [source.option for source in self.options_from]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"each option of transform.optionsFrom is named once: {twice}")
        both = sorted(set(names) & set(self.options))
        if both:
            raise ValueError(
                "an option is set either in transform.options or in transform.optionsFrom, "
                f"not both: {both}"
            )
        return self

    @field_validator("options")
    @classmethod
    def options_fit(cls, value: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(value, separators=(",", ":")).encode())
        if size > OPTIONS_MAX_BYTES:
            raise ValueError(
                f"transform.options is {size} bytes as JSON, more than {OPTIONS_MAX_BYTES}: "
                "keep large data in a ConfigMap or file the transform reads"
            )
        return value


CASSANDRA_BATCH_ROWS: Final = 10
"""Rows per unlogged batch by default: Cassandra's default warning threshold for
the partitions one unlogged batch spans."""
CASSANDRA_BATCH_BYTES: Final = 4096
"""Estimated bytes per batch by default: below Cassandra's 5 KiB warning threshold."""
CASSANDRA_WRITE_CONCURRENCY: Final = 32
"""Requests in flight per Spark task by default."""


class CassandraSink(Model):
    contact_points: list[HostPort] = Field(
        min_length=1,
        max_length=CONTACT_POINTS_MAX,
        description="Cassandra host[:port] contact points.",
    )
    keyspace: str = Field(pattern=CASSANDRA_NAME, max_length=48, description="Keyspace.")
    table: str = Field(pattern=CASSANDRA_NAME, max_length=48, description="Table.")
    credentials_secret: SecretName | None = Field(
        default=None, description="Secret with keys 'username' and 'password'."
    )
    tls: Tls | None = Field(
        default=None,
        description="Connect with TLS (client_encryption_options on the nodes); default: plain.",
    )
    batch_rows: int = Field(
        default=CASSANDRA_BATCH_ROWS,
        ge=1,
        le=1000,
        description=(
            "Most rows per unlogged batch; rows are grouped by the nodes that own them. "
            "1 writes one INSERT per row. Above Cassandra's "
            "unlogged_batch_across_partitions_warn_threshold (10) it logs warnings."
        ),
    )
    batch_bytes: int = Field(
        default=CASSANDRA_BATCH_BYTES,
        ge=256,
        le=49152,
        description=(
            "Most estimated bytes per unlogged batch; keep it below Cassandra's "
            "batch_size_warn_threshold (5 KiB by default). A larger row goes alone."
        ),
    )
    concurrency: int = Field(
        default=CASSANDRA_WRITE_CONCURRENCY,
        ge=1,
        le=1024,
        description="Most write requests in flight per Spark task.",
    )


DATASTORE_WRITE_CONCURRENCY: Final = 4
"""Commits (of up to 500 entities each) in flight per Spark task by default."""


class DatastoreSink(Model):
    project: str = Field(min_length=1, max_length=100, description="Google Cloud project id.")
    kind: str = Field(
        min_length=1, max_length=1500, description="Entity kind written (at most 1500 bytes)."
    )
    namespace: str | None = Field(default=None, max_length=100, description="Datastore namespace.")
    credentials_secret: SecretName | None = Field(
        default=None, description="Secret with key 'credentials.json' (service account)."
    )
    concurrency: int = Field(
        default=DATASTORE_WRITE_CONCURRENCY,
        ge=1,
        le=64,
        description=(
            "Most commits (each of up to 500 entities, Datastore's limit) in flight per "
            "Spark task; a commit sharing a key with one in flight waits for it."
        ),
    )


class Sink(Model):
    """Exactly one destination."""

    cassandra: CassandraSink | None = Field(default=None, description="Cassandra table sink.")
    datastore: DatastoreSink | None = Field(default=None, description="Datastore sink.")
    order_column: str | None = Field(
        default=None,
        pattern=CASSANDRA_NAME,
        max_length=48,
        description=(
            "Output column that orders the writes of one key (latest by event time): a "
            "timestamp, or an integer of milliseconds since 1970. A row replaces the stored "
            "one only if its value is not older, whatever the order its batch ran in "
            "(late events, replays, resets). Cassandra: the cells' write timestamp is the "
            "value in microseconds; Datastore: a transactional compare. Unset: the later "
            "batch wins (docs/writing-a-transform.md)."
        ),
    )

    @model_validator(mode="after")
    def exactly_one(self) -> Self:
        if (self.cassandra is None) == (self.datastore is None):
            raise ValueError("set exactly one of sink.cassandra or sink.datastore")
        return self


class KafkaDeadLetter(Model):
    topic: str = Field(
        pattern=r"^[a-zA-Z0-9._-]{1,249}$", max_length=249, description="Dead-letter topic."
    )
    bootstrap_servers: str | None = Field(
        default=None,
        max_length=BOOTSTRAP_MAX,
        description="Brokers of the dead-letter topic; default: the source's.",
    )
    security: KafkaSecurity | None = Field(
        default=None,
        description=(
            "How the driver connects to the dead-letter brokers; default: the source's "
            "security when bootstrapServers is unset (the same cluster), else PLAINTEXT. "
            "The source's credentials never go to other brokers."
        ),
    )

    def security_with(self, source: KafkaSource | None) -> KafkaSecurity:
        """The security in force: its own, else the source's when on the same brokers."""
        if self.security is not None:
            return self.security
        if self.bootstrap_servers is None and source is not None:
            return source.security
        return KafkaSecurity()


class PubSubDeadLetter(Model):
    topic: str = Field(pattern=PUBSUB_NAME, max_length=255, description="Dead-letter topic id.")
    project: str | None = Field(
        default=None,
        pattern=PUBSUB_PROJECT,
        max_length=100,
        description="Project of the topic; default: the Pub/Sub source's.",
    )


class DeadLetter(Model):
    """Exactly one destination of rejected records."""

    kafka: KafkaDeadLetter | None = Field(
        default=None, description="Rejected records go to this Kafka topic."
    )
    pubsub: PubSubDeadLetter | None = Field(
        default=None,
        description=(
            "Rejected records go to this Pub/Sub topic (with a Pub/Sub source only: it "
            "uses the source's endpoint and credentials)."
        ),
    )

    @model_validator(mode="after")
    def exactly_one(self) -> Self:
        if (self.kafka is None) == (self.pubsub is None):
            raise ValueError("set exactly one of deadLetter.kafka or deadLetter.pubsub")
        return self


class ReplicationStrategy(StrEnum):
    NETWORK_TOPOLOGY = "NetworkTopologyStrategy"
    SIMPLE = "SimpleStrategy"


DATACENTER = r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,63}$"


class KeyspaceReplication(Model):
    """How the driver creates the checkpoint keyspace (``createKeyspace``)."""

    strategy: ReplicationStrategy = Field(
        default=ReplicationStrategy.NETWORK_TOPOLOGY,
        description=(
            "NetworkTopologyStrategy (production: replicas per datacenter) or "
            "SimpleStrategy (one datacenter, development)."
        ),
    )
    datacenters: dict[str, Annotated[int, Field(ge=1, le=12)]] = Field(
        default_factory=dict,
        max_length=16,
        description=(
            "NetworkTopologyStrategy: replicas per datacenter, e.g. {dc1: 3}. Three "
            "replicas per datacenter keep the fencing row through the loss of one node "
            "(LWTs need a quorum of replicas)."
        ),
    )
    replication_factor: int | None = Field(
        default=None,
        ge=1,
        le=12,
        description=(
            "SimpleStrategy: replicas in the cluster. 1 loses the checkpoint (and the "
            "fencing row) with its node: for a single-node development cluster only."
        ),
    )

    @model_validator(mode="after")
    def _complete(self) -> Self:
        for name in self.datacenters:
            if not re.match(DATACENTER, name):
                raise ValueError(f"datacenter name {name!r} does not match {DATACENTER}")
        if self.strategy is ReplicationStrategy.SIMPLE:
            if self.replication_factor is None or self.datacenters:
                raise ValueError("SimpleStrategy takes replicationFactor (and no datacenters)")
        elif not self.datacenters or self.replication_factor is not None:
            raise ValueError(
                "NetworkTopologyStrategy takes datacenters, e.g. {dc1: 3} (and no "
                "replicationFactor)"
            )
        return self

    def cql(self) -> str:
        """The ``replication`` map of CREATE KEYSPACE."""
        entries = {"class": self.strategy.value}
        if self.strategy is ReplicationStrategy.SIMPLE:
            entries["replication_factor"] = str(self.replication_factor)
        else:
            entries |= {dc: str(n) for dc, n in sorted(self.datacenters.items())}
        return "{" + ", ".join(f"'{key}': '{value}'" for key, value in entries.items()) + "}"


class CassandraCheckpoint(Model):
    contact_points: list[HostPort] = Field(
        min_length=1,
        max_length=CONTACT_POINTS_MAX,
        description="Cassandra host[:port] contact points.",
    )
    keyspace: str = Field(
        default="sluice",
        pattern=CASSANDRA_NAME,
        max_length=48,
        description=(
            "Keyspace of the checkpoint tables. It must exist unless createKeyspace is "
            "set; the driver creates its tables in it."
        ),
    )
    create_keyspace: bool = Field(
        default=False,
        description=(
            "Create the keyspace if it is missing, with `replication`. Off (the default), "
            "a missing keyspace ends the driver with exit 2 naming it: a keyspace's "
            "replication decides whether the fencing row survives the loss of a node, so "
            "it is never chosen silently."
        ),
    )
    replication: KeyspaceReplication | None = Field(
        default=None,
        description="Replication of the keyspace if the driver creates it (createKeyspace).",
    )
    credentials_secret: SecretName | None = Field(
        default=None, description="Secret with keys 'username' and 'password'."
    )
    tls: Tls | None = Field(
        default=None,
        description="Connect with TLS (client_encryption_options on the nodes); default: plain.",
    )
    history_ttl_seconds: int = Field(
        default=30 * 24 * 3600,
        ge=0,
        le=CASSANDRA_MAX_TTL,
        description="TTL of batch history rows; 0 keeps them; at most 20 years (Cassandra's).",
    )

    @model_validator(mode="after")
    def _replication_to_create(self) -> Self:
        if self.create_keyspace and self.replication is None:
            raise ValueError("createKeyspace needs replication (strategy and replicas)")
        return self


class Checkpoint(Model):
    cassandra: CassandraCheckpoint = Field(description="Checkpoint store.")


class Trigger(Model):
    interval_seconds: float = Field(
        default=5.0, ge=0.0, le=3600.0, description="Seconds between micro-batch starts."
    )
    batch_timeout_seconds: float = Field(
        default=600.0,
        ge=1.0,
        le=86400.0,
        description=(
            "Seconds one attempt of a batch (read, transform, write, commit) may take. A "
            "batch that does not finish in time (a Spark job or a sink that hangs) ends "
            "the driver with exit 1 and reason BatchTimeout, so the operator restarts it; "
            "nothing of the batch is committed. Time spent waiting out a dependency "
            "outage does not count: each attempt has its own deadline."
        ),
    )


class Resources(Model):
    cores: int = Field(default=1, ge=1, le=64, description="CPU cores.")
    memory: str = Field(
        default="2g", pattern=MEMORY, max_length=16, description="JVM memory, e.g. 2g."
    )
    scratch: str = Field(
        default=SCRATCH_DEFAULT,
        pattern=QUANTITY,
        max_length=32,
        description=(
            "Local scratch space (Spark's shuffle spill and temporary files, in an emptyDir "
            "at /tmp): its size limit, and the pod's ephemeral-storage request and limit. "
            "Past it the kubelet evicts the pod."
        ),
    )


class Toleration(Model):
    """A Kubernetes toleration of the driver's or the executors' pods."""

    key: str | None = Field(
        default=None, max_length=317, description="Taint key; empty matches every key."
    )
    operator: str = Field(
        default="Equal", pattern=r"^(Equal|Exists)$", max_length=6, description="Equal or Exists."
    )
    value: str | None = Field(
        default=None, max_length=63, description="Taint value (operator Equal)."
    )
    effect: str | None = Field(
        default=None,
        pattern=r"^(NoSchedule|PreferNoSchedule|NoExecute)$",
        max_length=16,
        description="Taint effect; empty matches every effect.",
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        le=CASSANDRA_MAX_TTL,
        description="How long a NoExecute taint is tolerated.",
    )


class Placement(Model):
    """Where a pod may run: the same fields for the driver and for executor pods."""

    affinity: Affinity | None = Field(
        default=None,
        description="Node affinity and pod anti-affinity of the pods (Kubernetes' shape).",
    )
    node_selector: dict[str, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict, max_length=32, description="Node labels the pods must run on."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=32, description="Taints the pods tolerate."
    )


class Executors(Resources, Placement):
    instances: int = Field(
        default=0,
        ge=0,
        le=1000,
        description=(
            "Executor pods; 0 (the default) runs Spark inside the driver pod with its "
            "cores, and the driver gets no Kubernetes token."
        ),
    )


class Driver(Resources, Placement):
    cpu_limit: str | None = Field(
        default=None,
        pattern=CPU,
        max_length=32,
        description=(
            "CPU limit of the driver container (e.g. 2 or 1500m); default: none, the pod "
            "may use idle CPU beyond its request of 'cores'. Set it where a LimitRange "
            "or quota asks for limits."
        ),
    )
    memory_overhead: str | None = Field(
        default=None,
        pattern=MEMORY,
        max_length=16,
        description=(
            "Memory of the container beyond the JVM's 'memory' (Python workers, native "
            "buffers), e.g. 512m; default: 10% of memory, at least 384m (Spark's rule)."
        ),
    )


SPARK_CONF_KEYS: Final = frozenset(
    {
        "spark.default.parallelism",
        "spark.driver.maxResultSize",
        "spark.executor.heartbeatInterval",
        "spark.executor.memoryOverhead",
        "spark.io.compression.codec",
        "spark.kryoserializer.buffer.max",
        "spark.locality.wait",
        "spark.memory.fraction",
        "spark.memory.offHeap.enabled",
        "spark.memory.offHeap.size",
        "spark.memory.storageFraction",
        "spark.network.timeout",
        "spark.python.worker.memory",
        "spark.python.worker.reuse",
        "spark.rdd.compress",
        "spark.reducer.maxSizeInFlight",
        "spark.shuffle.compress",
        "spark.shuffle.file.buffer",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.files.maxPartitionBytes",
        "spark.sql.session.timeZone",
        "spark.sql.shuffle.partitions",
        "spark.sql.ui.retainedExecutions",
        "spark.task.maxFailures",
        "spark.ui.enabled",
        "spark.ui.retainedJobs",
        "spark.ui.retainedStages",
        "spark.ui.showConsoleProgress",
    }
)
"""Spark settings a pipeline may set: memory, parallelism, shuffle, compression, SQL
tuning, timeouts, the UI. Everything else (the master, identity and service accounts,
pods, volumes and secrets, jars, packages, plugins, extensions, listeners, JVM
options) is the operator's alone: a tenant who may create a pipeline must not gain
a ServiceAccount, a host path or code from elsewhere through it."""
SPARK_CONF_PREFIXES: Final = (
    "spark.sql.adaptive.",
    "spark.sql.execution.arrow.",
    "spark.sql.inMemoryColumnarStorage.",
)
"""Families of tuning settings (adaptive execution, Arrow batches, the columnar cache)."""
SPARK_CONF_MAX: Final = 64


SPARK_CONF_CODECS: Final = ("lz4", "lzf", "snappy", "zstd")
"""The values ``spark.io.compression.codec`` may take: Spark's short names. The setting
also takes a class name, which would have Spark load a class of the tenant's choosing."""
CODEC_KEY: Final = "spark.io.compression.codec"


def spark_conf_allowed(key: str) -> bool:
    """A tuning setting, and none that names a class to load, even in an allowed family
    (``spark.sql.adaptive.customCostEvaluatorClass``)."""
    allowed = key in SPARK_CONF_KEYS or key.startswith(SPARK_CONF_PREFIXES)
    return allowed and "class" not in key.lower()


EVENT_LOG_DIR: Final = r"^(/.*|[a-zA-Z][-a-zA-Z0-9+.]*://.+)$"
UI_PORT: Final = 4040


def event_log_mounted(path: str, pod: PodSettings) -> bool:
    """Whether ``path`` is at or under a writable mount of ``pod``."""
    return any(
        (path == m.mount_path or path.startswith(m.mount_path.rstrip("/") + "/"))
        and not m.read_only
        for m in pod.volume_mounts
    )


class SparkUi(Model):
    enabled: bool = Field(
        default=False,
        description=(
            "Serve Spark's web UI on the driver's port 4040 (port 'ui' of the driver pod and "
            "its Service; reach it with kubectl port-forward). Off by default: a pipeline "
            "runs millions of jobs and nobody browses them."
        ),
    )


class EventLog(Model):
    dir: str | None = Field(
        default=None,
        pattern=EVENT_LOG_DIR,
        max_length=1024,
        description=(
            "Where Spark writes its event logs for a History Server (rolling files of "
            "128 MiB): an absolute path on a writable volume of spark.pod (one the History "
            "Server reads too), or a Hadoop filesystem URI the image can write. Unset: no "
            "event logs."
        ),
    )


class Spark(Model):
    driver: Driver = Field(
        default_factory=Driver, description="Driver pod resources and placement."
    )
    executors: Executors = Field(default_factory=Executors, description="Executor resources.")
    pod: PodSettings = Field(
        default_factory=PodSettings,
        description=(
            "Additions to the pipeline's pods: env, envFrom, volumes and mounts, pull secrets "
            "and policy, labels, annotations, priority class (docs/pod-settings.md)."
        ),
    )
    ui: SparkUi = Field(default_factory=SparkUi, description="Spark's web UI on the driver.")
    event_log: EventLog = Field(
        default_factory=EventLog, description="Spark event logs for a History Server."
    )
    conf: dict[str, Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict,
        max_length=SPARK_CONF_MAX,
        description=(
            "Spark settings to tune (docs/tuning.md lists those a pipeline may set: memory, "
            "parallelism, shuffle, compression, SQL tuning, timeouts, the UI; the master, "
            "identity, pods, volumes, jars, plugins and JVM options are the operator's)."
        ),
    )

    @field_validator("conf")
    @classmethod
    def only_tuning(cls, value: dict[str, str]) -> dict[str, str]:
        refused = sorted(key for key in value if not spark_conf_allowed(key))
        if refused:
            raise ValueError(
                f"spark.conf may not set {', '.join(refused)} (the operator's alone); "
                "allowed: the settings docs/tuning.md lists"
            )
        codec = value.get(CODEC_KEY)
        if codec is not None and codec not in SPARK_CONF_CODECS:
            raise ValueError(
                f"spark.conf {CODEC_KEY} may be {', '.join(SPARK_CONF_CODECS)}, not {codec!r}"
            )
        return value

    @model_validator(mode="after")
    def _event_log_on_a_volume(self) -> Self:
        path = self.event_log.dir
        if path and path.startswith("/") and not event_log_mounted(path, self.pod):
            raise ValueError(
                f"spark.eventLog.dir {path!r} is not on a writable volume of "
                "spark.pod.volumeMounts (the root filesystem is read-only)"
            )
        return self

    @model_validator(mode="after")
    def _account_without_executors(self) -> Self:
        if self.pod.service_account_name and self.executors.instances > 0:
            raise ValueError(
                "spark.pod.serviceAccountName is for drivers without executors: a driver "
                "that runs executor pods uses the account the operator binds for it"
            )
        return self


class Upgrade(Model):
    mode: UpgradeMode = Field(
        default=UpgradeMode.CLEAN_STOP,
        description=(
            "CleanStop: stop the running driver cleanly, then start the new spec's. "
            "WarmHandover: start the new spec's driver as a standby first (Spark, Kafka, "
            "the stores and the transform checked on an empty frame, nothing claimed or "
            "written); only once it is ready is the running driver stopped cleanly, and the "
            "standby claims the next epoch as soon as that driver has released the "
            "checkpoint. A standby that fails to become ready leaves the running driver "
            "alone: the upgrade is reported failed (condition UpgradeFailed, an Event) "
            "until the spec changes again."
        ),
    )
    rollback: bool = Field(
        default=True,
        description=(
            "When the driver of a changed spec fails restart.maxFailures times in a row "
            "(exits, or pods not running within restart.startDeadlineSeconds), run the "
            "last spec that committed again, until the driver fields of the spec change."
        ),
    )
    stop_timeout_seconds: int = Field(
        default=120,
        ge=5,
        le=3600,
        description=(
            "Time a driver has to finish its batch on stop. A change applies to drivers "
            "started after it: the running one keeps the grace period its pod was created "
            "with (a pod's terminationGracePeriodSeconds cannot change)."
        ),
    )


class Failover(Model):
    node_lost_seconds: int = Field(
        default=45, ge=5, le=3600, description="Node unreachable this long: start elsewhere."
    )


class Restart(Model):
    backoff_seconds: int = Field(
        default=10,
        ge=0,
        le=3600,
        description=(
            "Delay before the second restart in a row, doubling for each further one; "
            "the first failure after a healthy run restarts at once."
        ),
    )
    max_backoff_seconds: int = Field(
        default=300, ge=0, le=86400, description="Cap of the exponential restart delay."
    )
    max_failures: int = Field(
        default=5, ge=1, le=1000, description="Failures in a row before the pipeline is Failed."
    )
    start_deadline_seconds: int = Field(
        default=300,
        ge=10,
        le=86400,
        description=(
            "A driver pod not running this long after its creation (unschedulable, image "
            "pull failing, a missing Secret or ConfigMap) is removed and counted as a failure."
        ),
    )


class ResetTo(StrEnum):
    EARLIEST = "Earliest"
    LATEST = "Latest"
    TIMESTAMP = "Timestamp"
    OFFSETS = "Offsets"


class PartitionOffset(Model):
    """Where one partition resumes after an offset reset."""

    topic: str = Field(
        pattern=r"^[a-zA-Z0-9._-]{1,249}$",
        max_length=249,
        description="One of source.kafka.topics.",
    )
    partition: int = Field(ge=0, le=1_000_000, description="Partition number.")
    offset: int = Field(
        ge=0,
        le=2**63 - 1,
        description="The next offset to read (Kafka's consumer-position convention).",
    )


RESET_ID: Final = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"


class OffsetReset(Model):
    """A one-off move of the committed positions: replay or skip.

    Applied once per ``id`` by the next driver, under its new epoch (which fences any
    older driver), before its first batch; the reset is a batch of its own in the
    checkpoint's history, with ``requestedBy`` and ``reason``. Setting a new ``id``
    stops the running driver cleanly first, as any spec change does."""

    id: str = Field(
        pattern=RESET_ID,
        max_length=63,
        description="Names this reset; a new id is a new reset, the same id is applied once.",
    )
    to: ResetTo = Field(
        description=(
            "Earliest (replay all that Kafka retains), Latest (skip to the last stable "
            "offsets), Timestamp (the first record at or after timestamp, per partition; "
            "the end where there is none) or Offsets (the partitions listed in offsets; "
            "the others keep their positions)."
        )
    )
    timestamp: str | None = Field(
        default=None,
        max_length=64,
        description="RFC 3339 time, for to: Timestamp.",
        json_schema_extra={"format": "date-time"},
    )
    offsets: list[PartitionOffset] | None = Field(
        default=None, max_length=1_000, description="Positions, for to: Offsets."
    )
    reason: str = Field(
        default="", max_length=1024, description="Why, for the checkpoint's batch history."
    )
    requested_by: str = Field(
        default="", max_length=253, description="Who asked (the sluice command sets it)."
    )

    @model_validator(mode="after")
    def target_fits_to(self) -> Self:
        if (self.to is ResetTo.TIMESTAMP) != (self.timestamp is not None):
            raise ValueError(
                "offsetReset.timestamp is set exactly when offsetReset.to is Timestamp"
            )
        if (self.to is ResetTo.OFFSETS) != bool(self.offsets):
            raise ValueError("offsetReset.offsets is set exactly when offsetReset.to is Offsets")
        if self.timestamp is not None:
            self.epoch_millis()
        named = [(p.topic, p.partition) for p in self.offsets or []]
        if len(set(named)) != len(named):
            raise ValueError("offsetReset.offsets names a partition twice")
        return self

    def epoch_millis(self) -> int:
        """``timestamp`` in milliseconds since the epoch (Kafka's record time)."""
        if self.timestamp is None:
            raise ValueError("offsetReset.timestamp is not set")
        try:
            when = datetime.fromisoformat(self.timestamp.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"offsetReset.timestamp {self.timestamp!r} is not an RFC 3339 time"
            ) from None
        if when.tzinfo is None:
            raise ValueError(f"offsetReset.timestamp {self.timestamp!r} needs a time zone")
        return int(when.timestamp() * 1000)


class PipelineSpec(Model):
    """``spec`` of a StreamingPipeline."""

    image: str = Field(
        min_length=1, max_length=512, description="Job image; changing it is a code upgrade."
    )
    source: Source = Field(description="Where records come from.")
    transform: Transform = Field(description="User transformation.")
    sink: Sink = Field(description="Where results go (exactly one of cassandra, datastore).")
    dead_letter: DeadLetter | None = Field(
        default=None,
        description=(
            "Where records the transform rejects go. Unset, a batch with rejects fails "
            "(nothing is dropped silently)."
        ),
    )
    checkpoint: Checkpoint = Field(description="Where offsets are committed.")
    trigger: Trigger = Field(default_factory=Trigger, description="Micro-batch timing.")
    spark: Spark = Field(default_factory=Spark, description="Spark resources and configuration.")
    upgrade: Upgrade = Field(
        default_factory=Upgrade, description="How a spec change replaces the driver."
    )
    failover: Failover = Field(default_factory=Failover, description="Node-loss failover.")
    standby: int = Field(
        default=0,
        ge=0,
        le=1,
        description=(
            "Hot standbys (0 or 1). With 1, a second driver of the running spec is started "
            "and kept ready (Spark, Kafka, the stores, the transform checked and kept warm), "
            "preferably on another node; it never plans or writes. When the driver's pod "
            "fails, is deleted or its node is lost, the operator promotes the standby (a new "
            "epoch, fencing the old driver) instead of starting a pod from nothing, then "
            "starts a new standby. Costs a second driver's memory and a little CPU."
        ),
    )
    restart: Restart = Field(default_factory=Restart, description="Restart backoff.")
    suspend: bool = Field(default=False, description="Stop the driver cleanly and stay stopped.")
    restart_nonce: str = Field(
        default="",
        max_length=253,
        description=(
            "Set to a new value to restart the driver without changing anything else: a "
            "clean stop (finish the batch, commit, exit) and a new driver with the next "
            "epoch, as for an upgrade; also how a Failed pipeline is retried as it is."
        ),
    )
    offset_reset: OffsetReset | None = Field(
        default=None,
        description=(
            "Replay or skip: move the committed positions once (per id), under a new "
            "epoch, recorded in the batch history. Set by `sluice offsets reset`."
        ),
    )

    @property
    def kafka(self) -> KafkaSource:
        """``source.kafka``, for code that runs only with a Kafka source."""
        if self.source.kafka is None:
            raise ValueError("source.kafka is not set (the pipeline reads Pub/Sub)")
        return self.source.kafka

    @property
    def kafka_dead_letter(self) -> KafkaDeadLetter | None:
        return self.dead_letter.kafka if self.dead_letter is not None else None

    @model_validator(mode="after")
    def rate_control_needs_an_interval(self) -> Self:
        kafka = self.source.kafka
        if kafka and kafka.backpressure.enabled and self.trigger.interval_seconds <= 0:
            raise ValueError(
                "source.kafka.backpressure.enabled needs trigger.intervalSeconds > 0: "
                "the cap is sized to a fraction of the interval"
            )
        return self

    @model_validator(mode="after")
    def dead_letters_fit_the_source(self) -> Self:
        target, kafka = self.kafka_dead_letter, self.source.kafka
        if self.dead_letter is not None and self.dead_letter.pubsub and kafka is not None:
            raise ValueError("deadLetter.pubsub needs source.pubsub: use deadLetter.kafka")
        if target is not None and kafka is None and target.bootstrap_servers is None:
            raise ValueError(
                "deadLetter.kafka.bootstrapServers is required with a Pub/Sub source "
                "(there are no source brokers to default to)"
            )
        if target is None or kafka is None:
            return self
        if target.bootstrap_servers not in (None, kafka.bootstrap_servers):
            return self
        if target.topic in kafka.topics:
            raise ValueError(
                "deadLetter.kafka.topic must not be one of source.kafka.topics: rejected "
                "records would be read again, and rejected again, forever"
            )
        return self

    @model_validator(mode="after")
    def reset_names_source_topics(self) -> Self:
        reset = self.offset_reset
        if reset is not None and self.source.kafka is None:
            raise ValueError(
                "offsetReset needs source.kafka: a Pub/Sub subscription has no offsets "
                "(seek the subscription instead)"
            )
        unknown = sorted(
            {p.topic for p in (reset.offsets or [])} - set(self.kafka.topics) if reset else set()
        )
        if unknown:
            raise ValueError(
                f"offsetReset.offsets names {', '.join(unknown)}, not in source.kafka.topics"
            )
        return self

    @field_validator("image")
    @classmethod
    def no_whitespace(cls, value: str) -> str:
        if value.strip() != value or " " in value:
            raise ValueError("image must not contain whitespace")
        return value
