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
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from sluice_dev import ports, probes, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, maven_copy, run
from sluice_dev.paths import Layout
from sluice_dev.servers.base import Server

NAME: Final = "kafka"
NODE_ID: Final = 1
BOOTSTRAP: Final = f"{ports.HOST}:{ports.KAFKA}"
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
            f"CONTROLLER://{ports.HOST}:{ports.KAFKA_CONTROLLER}"
        ),
        "advertised.listeners": f"PLAINTEXT://{BOOTSTRAP}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
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
    closed = probes.tcp_open(ports.HOST, ports.KAFKA)
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


def _exports(_layout: Layout) -> Mapping[str, str]:
    return {"SLUICE_KAFKA_BOOTSTRAP": BOOTSTRAP}


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
