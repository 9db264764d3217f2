"""``sluice-dev pipeline apply FILE [--cql FILE]``: a pipeline manifest written for a
cluster, run on the local stack, the last step of running one's own transform locally
(``examples/custom-transform/README.md``: build the image, apply, produce).

It starts what is not running (the servers, the CRD, an operator serving the
namespace: :func:`start_operator`, also ``sluice-dev operator start``), creates what
the driver needs and does not create itself (the source and dead-letter topics, the
sink's tables from a CQL file), and applies the manifest pointed at the stack:
:func:`localized`, a pure function, puts it in the namespace of ``--namespace``
(default ``sluice-demo``, whatever the manifest's own ``metadata.namespace``: the
examples name a cluster's namespace) with the stack's Kafka, Pub/Sub and Cassandra addresses, the
checkpoint keyspace's replication fit for its one Cassandra node, and a driver sized
for this machine. The image and the transform stay as written: the image
must be one the node agent knows (``sluice-dev image build``).

A Pub/Sub source reads the stack's Pub/Sub server (``source.pubsub.endpoint``), with
its project and subscription as written and without ``credentialsSecret``: the
server is an emulator, plaintext and without credentials. The manifest names a
subscription but not its topic, so the topic is made by a rule,
:func:`subscription_topic` (``ui-events-sub`` is a subscription to ``ui-events``);
:func:`pubsub_names` says what is created there: that topic, the subscription to it
and the dead-letter topic of ``deadLetter.pubsub`` with a subscription that keeps
its letters (:func:`topic_subscription`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from sluice_dev import demo, localcluster, ports, procs, stack
from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import Layout
from sluice_dev.produce import ensure_topic
from sluice_dev.pubsub import publish
from sluice_dev.servers import kube, nodeagent
from sluice_dev.servers.cassandra import CONTACT
from sluice_dev.servers.kafka import BOOTSTRAP
from sluice_dev.servers.pubsub import HOST as PUBSUB_HOST

SOURCE_PARTITIONS: Final = 4
OPERATOR_SERVERS: Final = (kube.CONTROLLER_MANAGER, kube.SCHEDULER, nodeagent.NAME)
"""What an operator and its drivers' pods need (with what these need): the control
plane and the node agent. The servers a pipeline reads and writes start with
``sluice-dev up``."""
STACK_REPLICATION: Final = {"strategy": "SimpleStrategy", "replicationFactor": 1}
"""A checkpoint keyspace the driver creates (``createKeyspace``) on the stack's single
Cassandra node: a production manifest's datacenters do not exist there."""


def localized(
    manifest: Mapping[str, Any], *, namespace: str, bootstrap: str, contact: str, pubsub: str
) -> dict[str, Any]:
    """The manifest in ``namespace`` with the stack's addresses (Kafka ``bootstrap``,
    Cassandra ``contact``, the Pub/Sub server ``pubsub``), a checkpoint keyspace
    replicated as one node can (:data:`STACK_REPLICATION`), a 1 s trigger and a driver
    of one core and 768 MiB without executor pods (a purely computational function)."""
    body = copy.deepcopy(dict(manifest))
    body["metadata"] = {**body.get("metadata", {}), "namespace": namespace}
    spec = body["spec"]
    source = spec["source"]
    if "kafka" in source:
        source["kafka"]["bootstrapServers"] = bootstrap
    if "pubsub" in source:
        source["pubsub"]["endpoint"] = pubsub
        source["pubsub"].pop("credentialsSecret", None)  # an emulator: no credentials
    for store in ("sink", "checkpoint"):
        if "cassandra" in spec.get(store, {}):
            spec[store]["cassandra"]["contactPoints"] = [contact]
    checkpoint = spec.get("checkpoint", {}).get("cassandra", {})
    if "replication" in checkpoint:  # the stack's Cassandra is one node, one datacenter
        checkpoint["replication"] = dict(STACK_REPLICATION)
    letters = spec.get("deadLetter", {}).get("kafka")
    if letters is not None and "kafka" in source:
        letters.pop("bootstrapServers", None)  # the source's Kafka
    elif letters is not None:
        letters["bootstrapServers"] = bootstrap
    spec["trigger"] = {"intervalSeconds": 1}
    spec["spark"] = {"driver": {"cores": 1, "memory": "768m"}, "executors": {"instances": 0}}
    return dict(body)


def topics(spec: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """The Kafka source topics and the Kafka dead-letter topic (if any) of a pipeline
    spec."""
    dead_letter = spec.get("deadLetter", {}).get("kafka", {}).get("topic")
    return list(spec["source"].get("kafka", {}).get("topics", [])), dead_letter


SUBSCRIPTION_SUFFIX: Final = "-sub"


def subscription_topic(subscription: str) -> str:
    """The topic a subscription is made on when the stack creates it: its name without
    a trailing ``-sub`` (``ui-events-sub`` -> ``ui-events``), else its own name."""
    return subscription.removesuffix(SUBSCRIPTION_SUFFIX) or subscription


def topic_subscription(topic: str) -> str:
    """The subscription the stack makes on a dead-letter topic, so that its letters are
    kept to be read (Pub/Sub drops what a topic without subscriptions receives):
    ``ui-events-dlq`` -> ``ui-events-dlq-sub``, the inverse of :func:`subscription_topic`."""
    return f"{topic}{SUBSCRIPTION_SUFFIX}"


@dataclass(frozen=True)
class PubSubNames:
    """What a Pub/Sub source needs on the server and the driver does not create: the
    topic, the subscription to it, and the dead-letter topic (if any), by project."""

    project: str
    topic: str
    subscription: str
    ack_deadline_seconds: int
    dead_letter: tuple[str, str] | None
    """(project, topic) of ``deadLetter.pubsub``."""


def pubsub_names(spec: Mapping[str, Any]) -> PubSubNames | None:
    """The Pub/Sub names of a pipeline spec; None without a Pub/Sub source."""
    source = spec["source"].get("pubsub")
    if source is None:
        return None
    project, subscription = source["project"], source["subscription"]
    letters = spec.get("deadLetter", {}).get("pubsub")
    return PubSubNames(
        project=project,
        topic=subscription_topic(subscription),
        subscription=subscription,
        ack_deadline_seconds=int(source.get("ackDeadlineSeconds", 60)),
        dead_letter=(letters.get("project", project), letters["topic"]) if letters else None,
    )


def cql_statements(text: str) -> list[str]:
    """The statements of a CQL file, without ``--`` comment lines."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def operator_process(namespace: str) -> str:
    """The name of the stack's operator process serving ``namespace`` (its pid file and
    its log, ``logs/<name>.log`` in the stack directory): the demo's for
    ``sluice-demo``, so that the demo, ``pipeline apply`` and ``operator start`` share
    one, else ``operator-<namespace>`` (a purely computational function)."""
    return demo.OPERATOR if namespace == demo.NAMESPACE else f"operator-{namespace}"


def start_operator(layout: Layout, namespace: str, say: Callable[[str], None]) -> None:
    """The control plane and node agent up, the CRD applied (server-side), ``namespace``
    created and an operator process of the stack serving it; idempotent: one already
    running is kept. Its ``/healthz`` and ``/metrics`` listen on the demo's port for
    ``sluice-demo``, else on a free one (said)."""
    stack.up(layout, OPERATOR_SERVERS, say=lambda line: say(f"    {line}"))
    port = demo.OPERATOR_PORT if namespace == demo.NAMESPACE else ports.free()
    localcluster.operator_for(
        layout,
        Kubectl(layout),
        namespace=namespace,
        name=operator_process(namespace),
        port=port,
        say=lambda line: say(f"    {line}"),
    )


def stop_operator(layout: Layout, namespace: str) -> int | None:
    """Stop the stack's operator serving ``namespace`` (SIGTERM, then SIGKILL after
    30 s); returns its pid, or None when none was running. Its pipelines keep their
    drivers: no operator deletes them on the way out."""
    pidfile = layout.pidfile(operator_process(namespace))
    pid = procs.read_pid(pidfile)
    if pid is not None:
        procs.terminate([pid], grace=30.0)
    pidfile.unlink(missing_ok=True)
    return pid


def apply(
    layout: Layout,
    path: Path,
    cql: Path | None,
    say: Callable[[str], None],
    *,
    namespace: str = demo.NAMESPACE,
) -> str:
    """Run the manifest at ``path`` on the local stack in ``namespace``, served by the
    stack's operator for it (started if needed); returns kubectl's answer."""
    manifest = yaml.safe_load(path.read_text())
    body = localized(
        manifest,
        namespace=namespace,
        bootstrap=BOOTSTRAP,
        contact=CONTACT,
        pubsub=PUBSUB_HOST,
    )
    say("starting the local stack (what is not running yet)")
    stack.up(layout, say=lambda line: say(f"    {line}"))
    kubectl = Kubectl(layout)
    say(f"the operator serving namespace {namespace}")
    start_operator(layout, namespace, say)
    sources, dead_letter = topics(body["spec"])
    for topic in sources:
        ensure_topic(BOOTSTRAP, topic, SOURCE_PARTITIONS)
    if dead_letter:
        ensure_topic(BOOTSTRAP, dead_letter, 1)
    if sources or dead_letter:
        say(f"topics {', '.join([*sources, *filter(None, [dead_letter])])}")
    names = pubsub_names(body["spec"])
    if names is not None:
        _create_pubsub(names, say)
    if cql is not None:
        _run_cql(cql_statements(cql.read_text()))
        say(f"tables of {cql}")
    return kubectl.apply(body)


def _create_pubsub(names: PubSubNames, say: Callable[[str], None]) -> None:
    """The topic, the subscription and the dead-letter topic on the stack's server."""
    host = PUBSUB_HOST
    publish.ensure_topic(host, names.project, names.topic)
    publish.ensure_subscription(
        host, names.project, names.topic, names.subscription, names.ack_deadline_seconds
    )
    say(
        f"Pub/Sub at {host}: subscription "
        f"{publish.subscription_path(names.project, names.subscription)} "
        f"to topic {publish.topic_path(names.project, names.topic)}"
    )
    if names.dead_letter is not None:
        project, topic = names.dead_letter
        publish.ensure_topic(host, project, topic)
        publish.ensure_subscription(host, project, topic, topic_subscription(topic))
        say(
            f"Pub/Sub dead-letter topic {publish.topic_path(project, topic)}, read by "
            f"subscription {publish.subscription_path(project, topic_subscription(topic))}"
        )
    say(
        "publish events:  .venv/bin/sluice-dev produce --pubsub "
        f"--project {names.project} --topic {names.topic} --count 1000"
    )


def _run_cql(statements: list[str]) -> None:
    from cassandra.cluster import Cluster

    host, port = CONTACT.rsplit(":", 1)
    cluster = Cluster([host], port=int(port))
    try:
        session = cluster.connect()
        for statement in statements:
            session.execute(statement, timeout=60)
    finally:
        cluster.shutdown()
