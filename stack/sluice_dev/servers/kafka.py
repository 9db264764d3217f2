"""A single-node Apache Kafka broker (KRaft, no ZooKeeper) for the local stack.

The driver reads planned offset ranges from Kafka and the tests produce into it, so
the stack runs a real broker: the ``kafka_2.13`` jars from Maven Central (see
``stack/maven/kafka/pom.xml``), one JVM acting as both broker and controller on
loopback, storage under ``layout.data("kafka")``.

Choices a test author should know:

- ``auto.create.topics.enable=false``: producing to or reading from a topic nobody
  created fails instead of silently creating a one-partition topic; tests create
  their topics explicitly (with the partition count they mean).
- Every replication factor and min ISR is 1; ``group.initial.rebalance.delay.ms=0``
  so a consumer group gets its assignment at once.
- The internal topics get 4 partitions instead of 50, so the first consumer group
  or transactional producer of a run does not wait for 50 partitions to load.

Besides the PLAINTEXT listener everything uses, two secure listeners let tests run
pipelines the way a production cluster demands, with the certificates of ``tls``:
``SASL_SSL`` (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; SCRAM users are made at run
time with ``add_scram_user``, the one PLAIN user is fixed in the broker's JAAS
configuration) and ``SSL`` with a required client certificate. The broker has no
authorizer: these listeners test authentication, not ACLs. Inter-broker and
controller traffic stays PLAINTEXT.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from sluice_dev import ports, probes, tls, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, maven_copy, run
from sluice_dev.paths import Layout
from sluice_dev.servers.base import Server

NAME: Final = "kafka"
NODE_ID: Final = 1
BOOTSTRAP: Final = f"{ports.HOST}:{ports.KAFKA}"
SASL_SSL_BOOTSTRAP: Final = f"{ports.HOST}:{ports.KAFKA_SASL_SSL}"
SSL_BOOTSTRAP: Final = f"{ports.HOST}:{ports.KAFKA_SSL}"
SCRAM_MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_MECHANISMS: Final = (*SCRAM_MECHANISMS, "PLAIN")
PLAIN_USER: Final = "plain-user"
PLAIN_PASSWORD: Final = "plain-user-secret"
POM: Final = STACK_SRC / "maven" / "kafka" / "pom.xml"

JVM_FLAGS: Final[tuple[str, ...]] = (
    "-Xms256m",
    "-Xmx512m",
    # The flags of Kafka's own kafka-run-class.sh, minus GC logging.
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    # No hsperfdata file in /tmp per JVM.
    "-XX:+PerfDisableSharedMem",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)


def _build(target: Path) -> None:
    maven_copy(
        POM,
        target / "lib",
        {"kafka.version": versions.KAFKA, "scala.binary.version": versions.KAFKA_SCALA},
    )


ARTIFACT: Final = Artifact(NAME, versions.KAFKA, _build, recipe=(POM,))


def java() -> str:
    """The ``java`` of ``JAVA_HOME`` if set, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _classpath(layout: Layout) -> str:
    # The JVM expands ``dir/*`` to every jar of dir itself; no shell is involved.
    return str(ARTIFACT.path(layout) / "lib" / "*")


def _properties_path(layout: Layout) -> Path:
    return layout.conf(NAME) / "server.properties"


def _log4j_path(layout: Layout) -> Path:
    return layout.conf(NAME) / "log4j.properties"


def server_properties(layout: Layout) -> dict[str, str]:
    """The broker's configuration, as written to ``server.properties``."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@{ports.HOST}:{ports.KAFKA_CONTROLLER}",
        "listeners": (
            f"PLAINTEXT://{ports.HOST}:{ports.KAFKA},"
            f"CONTROLLER://{ports.HOST}:{ports.KAFKA_CONTROLLER},"
            f"SASL_SSL://{SASL_SSL_BOOTSTRAP},"
            f"SSL://{SSL_BOOTSTRAP}"
        ),
        "advertised.listeners": (
            f"PLAINTEXT://{BOOTSTRAP},SASL_SSL://{SASL_SSL_BOOTSTRAP},SSL://{SSL_BOOTSTRAP}"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL"
        ),
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(layout.data(NAME)),
        "auto.create.topics.enable": "false",
        "delete.topic.enable": "true",
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        # A small machine: fewer threads than the defaults (3 network, 8 I/O).
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        **secure_listener_properties(layout),
    }


def secure_listener_properties(layout: Layout) -> dict[str, str]:
    """The ``SASL_SSL`` and ``SSL`` listeners: PEM files without passwords (Kafka
    refuses a key store password with PEM, and the key is not encrypted)."""
    files = tls.paths(layout)
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.server_bundle),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": f"{scram} required;",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{scram} required;",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f'{plain} required user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
        ),
    }


LOG4J_PROPERTIES: Final = """\
# Everything to stdout; the stack appends it to the server's log file.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n

# Per-request and per-partition state logs drown everything else.
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
"""


def _render_properties(values: Mapping[str, str]) -> str:
    lines = ["# Written by sluice_dev.servers.kafka; rewritten on every start."]
    lines += [f"{key}={value}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def new_cluster_id() -> str:
    """16 random bytes, base64url without padding (22 characters), as
    ``kafka-storage.sh random-uuid`` makes them; never starting with ``-``, which
    a command line would take for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def formatted(layout: Layout) -> bool:
    return (layout.data(NAME) / "meta.properties").exists()


def _prepare(layout: Layout) -> None:
    tls.ensure(layout)
    layout.conf(NAME).mkdir(parents=True, exist_ok=True)
    layout.data(NAME).mkdir(parents=True, exist_ok=True)
    _properties_path(layout).write_text(_render_properties(server_properties(layout)))
    _log4j_path(layout).write_text(LOG4J_PROPERTIES)
    if formatted(layout):
        return
    run(
        [
            java(),
            "-Xmx256m",
            f"-Dlog4j.configuration=file:{_log4j_path(layout)}",
            "-cp",
            _classpath(layout),
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            new_cluster_id(),
            "--config",
            str(_properties_path(layout)),
        ]
    )


def _argv(layout: Layout) -> Sequence[str]:
    return [
        java(),
        *JVM_FLAGS,
        f"-Dlog4j.configuration=file:{_log4j_path(layout)}",
        f"-Dkafka.logs.dir={layout.data(NAME)}",
        "-cp",
        _classpath(layout),
        "kafka.Kafka",
        str(_properties_path(layout)),
    ]


def _probe(layout: Layout) -> str | None:
    """Healthy when the broker answers a metadata request and lists itself."""
    for port in (ports.KAFKA, ports.KAFKA_SASL_SSL, ports.KAFKA_SSL):
        closed = probes.tcp_open(ports.HOST, port)
        if closed:
            return closed
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {
            "bootstrap.servers": BOOTSTRAP,
            "socket.connection.setup.timeout.ms": 2000,
            # Connection errors come back as the exception below; don't also
            # print them on stderr while the broker is starting.
            "log_level": 0,
        }
    )
    try:
        metadata = admin.list_topics(timeout=3)
    except KafkaException as err:
        return f"kafka at {BOOTSTRAP} does not answer metadata requests ({err})"
    if NODE_ID not in metadata.brokers:
        return f"kafka at {BOOTSTRAP} does not list broker {NODE_ID} yet"
    return None


SCRAM_ITERATIONS: Final = 4096


def add_scram_user(
    name: str, password: str, mechanism: str = "SCRAM-SHA-512", *, timeout: float = 30.0
) -> None:
    """Create (or replace) the SCRAM credential of user ``name`` for ``mechanism``
    (one of ``SCRAM_MECHANISMS``), through the PLAINTEXT listener. The controller
    commits it first; this returns once the broker itself describes it from its
    metadata, which its ``SASL_SSL`` listener authenticates against."""
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"SCRAM mechanism {mechanism!r} is not one of {SCRAM_MECHANISMS}")
    # The SCRAM types are missing from the package's re-exports for type checkers,
    # not from the package.
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP, "log_level": 0})
    kind = ScramMechanism[mechanism.replace("-", "_")]
    upsertion = UserScramCredentialUpsertion(
        name, ScramCredentialInfo(kind, SCRAM_ITERATIONS), password.encode()
    )
    futures = admin.alter_user_scram_credentials([upsertion], request_timeout=timeout)
    futures[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while not _has_scram_credential(admin, name, kind):
        if time.monotonic() > deadline:
            raise TimeoutError(f"kafka at {BOOTSTRAP} does not list {mechanism} of {name!r}")
        time.sleep(0.1)


def _has_scram_credential(admin: Any, name: str, kind: Any) -> bool:
    from confluent_kafka import KafkaException

    try:
        found = admin.describe_user_scram_credentials([name], request_timeout=5)[name].result()
    except KafkaException:  # RESOURCE_NOT_FOUND until the broker has the credential
        return False
    return any(info.mechanism == kind for info in found.scram_credential_infos)


def _exports(layout: Layout) -> Mapping[str, str]:
    return {
        "SLUICE_KAFKA_BOOTSTRAP": BOOTSTRAP,
        "SLUICE_KAFKA_SASL_SSL_BOOTSTRAP": SASL_SSL_BOOTSTRAP,
        "SLUICE_KAFKA_SSL_BOOTSTRAP": SSL_BOOTSTRAP,
        "SLUICE_KAFKA_PLAIN_USER": PLAIN_USER,
        "SLUICE_KAFKA_PLAIN_PASSWORD": PLAIN_PASSWORD,
        **tls.exports(layout),
    }


ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)
SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        artifacts=(ARTIFACT.name,),
        prepare=_prepare,
        exports=_exports,
        start_timeout=120.0,
        stop_grace=30.0,
    ),
)
