"""A single Apache Cassandra 5.0 node for the local stack.

Sluice keeps its checkpoints in Cassandra (committed with lightweight transactions)
and writes one of its sinks there, so the stack runs a real node: the
``cassandra-all`` jars from Maven Central (see ``stack/maven/cassandra/pom.xml``) in
one JVM on loopback, data under ``layout.data("cassandra")``.

5.0 is the first line that runs on Java 17; the JVM needs the module flags of the
upstream ``conf/jvm17-server.options``, copied below. The node is tuned to start
fast and small (1 GiB heap, no gossip settling, no ring state, no fsync of system
tables) and is for development and tests only.

What one node has of its own (name, ports, cluster name, authentication and client
encryption) is a ``Node``; the open node here and ``cassandra_secure`` share the
rest: artifact, JVM flags, configuration and probe.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sluice_dev import ports, probes, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, maven_copy
from sluice_dev.paths import Layout
from sluice_dev.servers.base import Server

NAME: Final = "cassandra"
CONTACT: Final = f"{ports.HOST}:{ports.CASSANDRA_NATIVE}"
CLUSTER_NAME: Final = "sluice-dev"
# SimpleSnitch puts every node here; clients' DC-aware policies need the name.
DATACENTER: Final = "datacenter1"
POM: Final = STACK_SRC / "maven" / "cassandra" / "pom.xml"

# Native libraries Maven would copy for other systems; the node never loads them.
FOREIGN_CLASSIFIERS: Final = ("osx-x86_64", "osx-aarch_64", "windows-x86_64")

# Verbatim from apache/cassandra conf/jvm17-server.options (GC and JPMS sections,
# plus the Netty options), as the cassandra launch script would pass them.
JVM17_SERVER_OPTIONS: Final[tuple[str, ...]] = (
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1RSetUpdatingPauseTimePercent=5",
    "-XX:MaxGCPauseMillis=300",
    "-XX:InitiatingHeapOccupancyPercent=70",
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.sql/java.sql=ALL-UNNAMED",
    "--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
)

JVM_FLAGS: Final[tuple[str, ...]] = (
    "-Xms1G",
    "-Xmx1G",
    "-Xss256k",
    *JVM17_SERVER_OPTIONS,
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:+PerfDisableSharedMem",
    "-Djava.net.preferIPv4Stack=true",
    "-Dcassandra-foreground=yes",
    # Fast start of a fresh single node: no waiting for gossip to settle (there is
    # nobody to gossip with), no saved ring state, the one token fixed.
    "-Dcassandra.skip_wait_for_gossip_to_settle=0",
    "-Dcassandra.load_ring_state=false",
    "-Dcassandra.initial_token=0",
    # No fsync of the system keyspaces: for throwaway test data only.
    "-Dcassandra.unsafesystem=true",
)


def _build(target: Path) -> None:
    maven_copy(
        POM,
        target / "lib",
        {
            "cassandra.version": versions.CASSANDRA,
            # A user property of dependency:copy-dependencies.
            "excludeClassifiers": ",".join(FOREIGN_CLASSIFIERS),
        },
    )


ARTIFACT: Final = Artifact(NAME, versions.CASSANDRA, _build, recipe=(POM,))


def java() -> str:
    """The ``java`` of ``JAVA_HOME`` if set, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


PAXOS_VARIANT: Final = os.environ.get("SLUICE_CASSANDRA_PAXOS", "v2")
"""``v1`` or ``v2``; the environment switch exists to measure one against the other."""


@dataclass(frozen=True)
class Node:
    """What sets one of the stack's Cassandra nodes apart: its name (the server's,
    the directories'), ports, and what it demands of clients. Each node is a cluster
    of its own."""

    name: str
    cluster_name: str
    native_port: int
    storage_port: int
    security: Callable[[Layout], str]
    """The YAML of authentication, authorization and client encryption."""
    jvm_flags: tuple[str, ...] = ()

    @property
    def contact(self) -> str:
        return f"{ports.HOST}:{self.native_port}"


def _open_security(_layout: Layout) -> str:
    return """\
# A development stack on loopback: no authentication, no authorization. The
# project's code passes credentials only when a secret names them.
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
network_authorizer: AllowAllNetworkAuthorizer
"""


NODE: Final = Node(
    name=NAME,
    cluster_name=CLUSTER_NAME,
    native_port=ports.CASSANDRA_NATIVE,
    storage_port=ports.CASSANDRA_STORAGE,
    security=_open_security,
)


def _yaml_path(layout: Layout, node: Node) -> Path:
    return layout.conf(node.name) / "cassandra.yaml"


def _logback_path(layout: Layout, node: Node) -> Path:
    return layout.conf(node.name) / "logback.xml"


def cassandra_yaml(layout: Layout, node: Node = NODE) -> str:
    """The node's configuration; every key Cassandra has no default for is here."""
    data = layout.data(node.name)
    return f"""\
# Written by sluice_dev.servers.cassandra; rewritten on every start.
cluster_name: {node.cluster_name}
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{ports.HOST}:{node.storage_port}"
listen_address: {ports.HOST}
rpc_address: {ports.HOST}
storage_port: {node.storage_port}
start_native_transport: true
native_transport_port: {node.native_port}

{node.security(layout)}
data_file_directories:
  - {data / "data"}
commitlog_directory: {data / "commitlog"}
saved_caches_directory: {data / "saved_caches"}
hints_directory: {data / "hints"}
cdc_raw_directory: {data / "cdc_raw"}
commitlog_sync: periodic
commitlog_sync_period: 10000ms

# A fresh 5.0 cluster, nothing to stay compatible with.
storage_compatibility_mode: NONE
# Tests drop a keyspace each; don't keep a snapshot of every one.
auto_snapshot: false
# One node: nobody to hand hints to.
hinted_handoff_enabled: false
# Lightweight transactions (Sluice's claims and commits) with Paxos v2 (4.1+): fewer
# round trips and reads per LWT than v1, the default. See docs/tuning.md.
paxos_variant: {PAXOS_VARIANT}
"""


LOGBACK_XML: Final = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by sluice_dev.servers.cassandra: INFO to stdout, which the stack
     appends to the server's log file. Without it Cassandra logs at DEBUG. -->
<configuration scan="false">
  <shutdownHook class="ch.qos.logback.core.hook.DefaultShutdownHook"/>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder>
      <pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="STDOUT"/>
  </root>
</configuration>
"""


def prepare(layout: Layout, node: Node) -> None:
    layout.conf(node.name).mkdir(parents=True, exist_ok=True)
    for sub in ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs"):
        (layout.data(node.name) / sub).mkdir(parents=True, exist_ok=True)
    _yaml_path(layout, node).write_text(cassandra_yaml(layout, node))
    _logback_path(layout, node).write_text(LOGBACK_XML)


def argv(layout: Layout, node: Node) -> Sequence[str]:
    return [
        java(),
        *JVM_FLAGS,
        *node.jvm_flags,
        f"-Dcassandra.config={_yaml_path(layout, node).as_uri()}",
        f"-Dcassandra.storagedir={layout.data(node.name)}",
        f"-Dcassandra.logdir={layout.data(node.name) / 'logs'}",
        f"-Dlogback.configurationFile={_logback_path(layout, node)}",
        "-cp",
        # The JVM expands ``dir/*`` to every jar of dir itself; no shell is involved.
        str(ARTIFACT.path(layout) / "lib" / "*"),
        "org.apache.cassandra.service.CassandraDaemon",
    ]


def cql_probe(node: Node, **connect: Any) -> str | None:
    """Healthy when a CQL client can connect and read ``system.local`` of the pinned
    release; ``connect`` goes to the driver's ``Cluster`` (TLS, credentials)."""
    closed = probes.tcp_open(ports.HOST, node.native_port)
    if closed:
        return closed
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy

    profile = ExecutionProfile(
        load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=DATACENTER), request_timeout=5
    )
    cluster = Cluster(
        contact_points=[ports.HOST],
        port=node.native_port,
        protocol_version=5,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=3,
        control_connection_timeout=3,
        **connect,
    )
    try:
        session = cluster.connect()
        row = session.execute("SELECT release_version FROM system.local").one()
    except Exception as err:  # the driver raises many unrelated types
        return f"{node.name} at {node.contact} does not answer CQL ({type(err).__name__}: {err})"
    finally:
        cluster.shutdown()
    if row is None:
        return f"{node.name} at {node.contact} has no row in system.local"
    if row.release_version != versions.CASSANDRA:
        return f"{node.name} at {node.contact} is {row.release_version}, not {versions.CASSANDRA}"
    return None


def _exports(_layout: Layout) -> Mapping[str, str]:
    return {"SLUICE_CASSANDRA_CONTACT": CONTACT}


ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)
SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=lambda layout: argv(layout, NODE),
        probe=lambda _layout: cql_probe(NODE),
        artifacts=(ARTIFACT.name,),
        prepare=lambda layout: prepare(layout, NODE),
        exports=_exports,
        start_timeout=180.0,
        stop_grace=30.0,
    ),
)
