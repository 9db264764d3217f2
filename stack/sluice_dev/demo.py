"""``make demo``: the KPI example on the local stack, through a node failure and a code
upgrade, ending with what a user checks: every event counted once.

Steps: start the stack with its nodes (real nodes under ``make demo``, the node agent
under ``make demo-agent``: :mod:`sluice_dev.demonodes`); install the CRD; start the
operator (a process of the stack, watching namespace ``sluice-demo``, which Pod
Security admission holds to ``restricted``); give the nodes the job image as ``v1``
and ``v2``; create the topic and the KPI table; apply ``examples/kpi-pipeline.yaml``
with local addresses; produce events at a steady rate; lose the driver's node (its
kubelet stops, or the node agent partitions it: the driver keeps running there, a
zombie, and is fenced) and time the failover; apply the v2 image (a warm handover: v2
starts as a standby while v1 runs) and time the upgrade, and the handover gap from the
batch history (v1's last commit to v2's first); wait until the checkpoint holds Kafka's
end offsets; compare the KPI table with the events produced, window by window. The
stack and the operator stay up to be explored.

Every run uses fresh topic names and a fresh pipeline (a previous demo pipeline is
deleted first), so a second run starts clean.
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import yaml

from sluice_api import cluster
from sluice_dev import demoalerts, demonodes, localcluster, ports, stack
from sluice_dev.events import EventFactory, normalised_page
from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.produce import Background, ensure_topic
from sluice_dev.servers import alertmanager, prometheus
from sluice_dev.servers.cassandra import CONTACT
from sluice_dev.servers.kafka import BOOTSTRAP

NAMESPACE: Final = "sluice-demo"
PIPELINE: Final = "page-kpis"
KEYSPACE: Final = "sluice_demo"
OPERATOR: Final = "demo-operator"
OPERATOR_PORT: Final = 18090 + ports.OFFSET
DRIVER_METRICS_PORT: Final = 8090
"""The driver's metrics port; it listens on its pod's IP, one per pod on the node agent."""
EXAMPLE: Final = REPO_ROOT / "examples" / "kpi-pipeline.yaml"
SCHEMA: Final = REPO_ROOT / "examples" / "kpi-schema.cql"
WINDOW_SECONDS: Final = 60


@dataclass
class Summary:
    records_in: int = 0
    in_sink: int = 0
    missing: int = 0
    duplicates: int = 0
    failover_seconds: float | None = None
    upgrade_gap_seconds: float | None = None
    handover_gap_seconds: float | None = None
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        def seconds(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.1f}s"

        return [
            f"records in: {self.records_in}",
            f"records in sink: {self.in_sink}",
            f"missing: {self.missing}",
            f"duplicates: {self.duplicates}",
            f"failover time: {seconds(self.failover_seconds)}",
            f"upgrade gap: {seconds(self.upgrade_gap_seconds)}",
            f"handover gap: {seconds(self.handover_gap_seconds)}",
        ]


def say(text: str) -> None:
    print(f"[demo {datetime.now().strftime('%H:%M:%S')}] {text}", flush=True)


@dataclass
class Steps:
    """The demo's numbered steps (``3/8 ...``)."""

    total: int
    done: int = 0

    def say(self, text: str) -> None:
        self.done += 1
        say(f"{self.done}/{self.total} {text}")


def run(layout: Layout, *, events: int | None, rate: float, alerts: bool = False) -> int:
    """The demo; with ``alerts`` (``make demo-alerts``), watched by the stack's
    Prometheus and Alertmanager (:mod:`sluice_dev.demoalerts`), a Cassandra outage
    added before the last step, and each fault's alert timeline printed."""
    if not alerts:
        return _run(layout, events=events, rate=rate, alerting=None)
    with demoalerts.watched(f"{NAMESPACE}/{PIPELINE}", say) as alerting:
        return _run(layout, events=events, rate=rate, alerting=alerting)


def _run(
    layout: Layout, *, events: int | None, rate: float, alerting: demoalerts.Alerting | None
) -> int:
    stamp = datetime.now(UTC).strftime("%H%M%S")
    topic, dead_letters = f"ui-events-{stamp}", f"ui-events-dlq-{stamp}"
    factory = EventFactory(seed=int(stamp))
    nodes = demonodes.for_stack()
    events = nodes.events if events is None else events
    steps = Steps(9 if alerting else 8)
    steps.say(f"starting the local stack (Kafka, Cassandra, Kubernetes, {nodes.what})")
    nodes.up(layout, say=lambda line: print(f"    {line}", flush=True))
    kubectl = Kubectl(layout)

    steps.say("installing the CRD and starting the operator")
    localcluster.operator_for(
        layout,
        kubectl,
        namespace=NAMESPACE,
        name=OPERATOR,
        port=OPERATOR_PORT,
        say=say,
        pod_security="restricted",
    )
    if alerting:
        say("    monitoring: Prometheus Operator, Prometheus, Alertmanager; the chart's")
        say("    PodMonitor and PrometheusRule, a ScrapeConfig for the operator process")
        demoalerts.install(
            layout, kubectl, namespace=NAMESPACE, operator_port=OPERATOR_PORT, say=say
        )
        say(f"    Prometheus {prometheus.URL}, Alertmanager {alertmanager.URL}: rules loaded")

    steps.say(f"job images {nodes.image}:v1 and :v2 on {nodes.what}")
    v1, v2 = nodes.images(layout, ("v1", "v2"))
    if _pipeline(kubectl) is not None:
        say("    deleting the previous demo pipeline (its driver stops cleanly)")
        kubectl("delete", "streamingpipeline", PIPELINE, "-n", NAMESPACE, "--timeout=180s")

    steps.say(f"topics {topic} and {dead_letters}, table {KEYSPACE}.page_kpis")
    ensure_topic(BOOTSTRAP, topic, 4)
    ensure_topic(BOOTSTRAP, dead_letters, 1)
    cassandra = Cassandra(kubectl.cluster_id())
    cassandra.reset()

    steps.say(f"kubectl apply examples/kpi-pipeline.yaml (local addresses, image {v1})")
    manifest = localized(_example(), topic, dead_letters, v1)
    print(kubectl.apply(manifest).rstrip(), flush=True)
    producer = Background(BOOTSTRAP, topic, events, rate, factory).start()
    say(f"    producing {events:,} events at {rate:.0f}/s in the background")
    watch = Watch(kubectl, cassandra, producer)
    watch.until(lambda s: _running(s, 1), "the first driver Running", timeout=240)
    status = watch.until(
        lambda s: (s.get("lastCommit") or {}).get("batchId", 0) >= 3, "commits", 120
    )

    summary = Summary(records_in=events)
    steps.say("forced node failure: losing the driver's node")
    node = _driver_node(kubectl, status["driverPod"])
    epoch = int(status["epoch"])
    began, lost_at = time.monotonic(), time.time()
    how = nodes.lose(layout, node)
    say(f"    node {node} lost, {how} (a zombie)")
    watch.until(lambda s: _running(s, epoch + 1), "a new driver on the other node", 240)
    summary.failover_seconds = time.monotonic() - began
    say(f"    failover in {summary.failover_seconds:.1f}s; bringing {node} back")
    nodes.heal(layout, node)
    if alerting:
        lost = alerting.fault(f"node {node} lost ({how.split(':')[0]})", at=lost_at)
        lost.steps.append((lost_at + summary.failover_seconds, f"epoch {epoch + 1} Running"))
        alerting.fired(lost, demoalerts.FENCED, timeout=FENCED_TIMEOUT)

    steps.say(f"code upgrade: kubectl apply with image {v2}")
    epoch = int(_pipeline(kubectl)["status"]["epoch"])  # type: ignore[index]
    began = time.monotonic()
    print(kubectl.apply(localized(_example(), topic, dead_letters, v2)).rstrip())
    watch.until(
        lambda s: _running(s, epoch + 1) and s.get("image") == v2,
        "the v2 driver Running",
        240,
    )
    summary.upgrade_gap_seconds = time.monotonic() - began
    say(f"    upgrade gap (apply -> v2 driver running): {summary.upgrade_gap_seconds:.1f}s")

    if alerting:
        # The outage comes after v2's first commit, or the handover gap would hold it.
        watch.until(
            lambda _s: cassandra.handover_gap(epoch, epoch + 1) is not None or not producer.running,
            "the v2 driver's first commit",
            120,
        )
        steps.say("a Cassandra outage while events keep arriving, watched by the alerts")
        summary.records_in += outage(layout, alerting, topic, factory, start=events)

    steps.say("waiting for the last events to be committed")
    producer.wait()
    ends = _end_offsets(topic)
    watch.until(lambda _s: cassandra.committed() == ends, "the end offsets committed", 300)
    summary.handover_gap_seconds = cassandra.handover_gap(epoch, epoch + 1)
    if summary.handover_gap_seconds is None:
        say("    handover gap: n/a (v2 took over when no events were left to read)")
    else:
        gap_seconds = summary.handover_gap_seconds
        say(f"    handover gap (last v1 commit -> first v2 commit): {gap_seconds:.1f}s")
    expected = expected_kpis(factory, summary.records_in)
    actual = cassandra.kpis()
    summary.in_sink = sum(actual.values())
    for key in expected.keys() | actual.keys():
        difference = actual.get(key, 0) - expected.get(key, 0)
        summary.missing += max(0, -difference)
        summary.duplicates += max(0, difference)
    print(kubectl("get", "sp", "-n", NAMESPACE, "-o", "wide").rstrip(), flush=True)
    metrics = _driver_metrics(kubectl)
    print()
    for line in summary.lines():
        print(line)
    if alerting:
        for line in [*alerting.dashboard(layout.stack / "demo-dashboard.png"), *alerting.report()]:
            print(line)
    print(explore(nodes.shell(layout), metrics, topic, alerts=alerting is not None), flush=True)
    clean = summary.missing == 0 and summary.duplicates == 0
    return 0 if clean and not (alerting and alerting.problems) else 1


FENCED_TIMEOUT: Final = 120.0
"""Seconds from the node's loss to ``SluiceDriverFenced`` in Alertmanager, at most:
the failover, a scrape and an evaluation (5 s each) and the notification."""
OUTAGE_RATE: Final = 20.0
"""Events per second produced during the outage, so Kafka holds records the pipeline
cannot commit (``SluicePipelineNotCommitting`` needs a lag)."""
OUTAGE_ALERT_TIMEOUT: Final = 420.0
"""Seconds from Cassandra's stop to both outage alerts in Alertmanager, at most: the
rules' ``for:`` (2 min) and windows (60 s) are 3 minutes; twice that, and a minute."""
RESOLVE_TIMEOUT: Final = 300.0


def outage(
    layout: Layout,
    alerting: demoalerts.Alerting,
    topic: str,
    factory: EventFactory,
    *,
    start: int,
) -> int:
    """Cassandra stopped with events ``start ..`` arriving at ``OUTAGE_RATE``, until
    both outage alerts are in Alertmanager, then started again and the alerts waited
    for until they leave it; returns how many events were produced meanwhile."""
    more = Background(BOOTSTRAP, topic, 10**7, OUTAGE_RATE, factory, start=start).start()
    say(f"    producing events from #{start:,} at {OUTAGE_RATE:.0f}/s")
    fault = alerting.fault("Cassandra stopped (the sink and the checkpoint store)")
    stack.stop(layout, "cassandra")
    say("    Cassandra stopped: the driver keeps its batch and retries")
    alerting.fired(
        fault, demoalerts.UNAVAILABLE, timeout=OUTAGE_ALERT_TIMEOUT, dependency="cassandra"
    )
    alerting.fired(fault, demoalerts.NOT_COMMITTING, timeout=OUTAGE_ALERT_TIMEOUT)
    fault.steps.append((time.time(), "Cassandra started"))
    stack.up(layout, ["cassandra"], say=lambda _line: None)
    fault.steps.append((time.time(), "Cassandra healthy"))
    say("    Cassandra is back; waiting for the alerts to resolve")
    alerting.resolved(fault, timeout=RESOLVE_TIMEOUT)
    more.stop()
    produced = more.wait(60)
    say(f"    {produced:,} events produced during the outage")
    return produced


def explore(shell: str, metrics: str, topic: str, *, alerts: bool = False) -> str:
    """What to try next, each command run where the stack is (``shell``: the prefix
    that puts a command in the stack's namespace, or its environment)."""
    operator = f"http://127.0.0.1:{OPERATOR_PORT}/metrics"
    monitoring = (
        f"""
  {shell} curl -s {alertmanager.URL}/api/v2/alerts     (the alerts)
  {shell} .venv/bin/sluice-dev dashboard --pipeline {NAMESPACE}/{PIPELINE}"""
        if alerts
        else ""
    )
    return f"""
The stack and the operator keep running. Explore (each command runs where the stack
runs, with its KUBECONFIG and kubectl):
  {shell} kubectl -n {NAMESPACE} get sp,pods -o wide
  {shell} kubectl -n {NAMESPACE} describe sp {PIPELINE}
  {shell} kubectl -n {NAMESPACE} logs <the driver pod>
  {shell} curl -s {metrics} | grep ^sluice_        (the driver)
  {shell} curl -s {operator} | grep ^sluice_   (the operator)
  {shell} .venv/bin/sluice-dev produce --topic {topic} --rate 100 --count 1000
  {shell} .venv/bin/sluice-dev logs {OPERATOR}{monitoring}
Stop everything with:  make down"""


# -- the pipeline --------------------------------------------------------------------


def _example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def localized(example: Mapping[str, Any], topic: str, dlq: str, image: str) -> dict[str, Any]:
    """The example manifest pointed at the local stack (a pure function)."""
    body = copy.deepcopy(dict(example))
    body["metadata"] = {"name": PIPELINE, "namespace": NAMESPACE}
    spec = body["spec"]
    spec["image"] = image
    spec["source"]["kafka"].update(
        bootstrapServers=BOOTSTRAP, topics=[topic], maxRecordsPerPartition=5_000
    )
    spec["sink"]["cassandra"].update(contactPoints=[CONTACT], keyspace=KEYSPACE)
    spec["checkpoint"]["cassandra"].update(contactPoints=[CONTACT], keyspace=KEYSPACE)
    spec["deadLetter"] = {"kafka": {"topic": dlq}}
    spec["trigger"] = {"intervalSeconds": 1}
    spec["spark"] = {"driver": {"cores": 1, "memory": "768m"}, "executors": {"instances": 0}}
    spec["upgrade"] = {"mode": "WarmHandover", "stopTimeoutSeconds": 60}
    spec["failover"] = {"nodeLostSeconds": 5}
    spec["restart"] = {"backoffSeconds": 1, "maxBackoffSeconds": 8, "maxFailures": 10}
    return body


def expected_kpis(factory: EventFactory, count: int) -> Counter[tuple[str, int]]:
    """Events per (page, window start) for events ``0 .. count-1``, in plain Python."""
    kpis: Counter[tuple[str, int]] = Counter()
    for seq in range(count):
        event = factory.event(seq)
        seconds = int(str(event["ts"])) // 1000
        kpis[(normalised_page(str(event["page"])), seconds - seconds % WINDOW_SECONDS)] += 1
    return kpis


def _running(status: Mapping[str, Any], epoch: int) -> bool:
    return status.get("phase") == "Running" and int(status.get("epoch", 0)) >= epoch


def _pipeline(kubectl: Kubectl) -> dict[str, Any] | None:
    found = kubectl("get", "sp", "-n", NAMESPACE, "-o", "json")
    for item in json.loads(found).get("items", []):
        if item["metadata"]["name"] == PIPELINE:
            return dict(item)
    return None


def _driver_node(kubectl: Kubectl, pod: str) -> str:
    found = json.loads(kubectl("get", "pod", pod, "-n", NAMESPACE, "-o", "json"))
    return str(found["spec"]["nodeName"])


def _driver_metrics(kubectl: Kubectl) -> str:
    """The running driver's metrics URL, or a placeholder that says where it is."""
    status = (_pipeline(kubectl) or {}).get("status") or {}
    name = status.get("driverPod")
    if not name:
        return driver_metrics_url({})
    found = json.loads(kubectl("get", "pod", str(name), "-n", NAMESPACE, "-o", "json"))
    return driver_metrics_url(found)


def driver_metrics_url(pod: Mapping[str, Any]) -> str:
    """Where the driver ``pod`` (as JSON) serves its metrics: its own pod IP, on a real
    node as on the node agent, which gives each pod a loopback address (a pure
    function)."""
    ip = (pod.get("status") or {}).get("podIP") or "<the driver pod's IP>"
    return f"http://{ip}:{DRIVER_METRICS_PORT}/metrics"


# -- the pieces the demo runs ----------------------------------------------------------


def gap(commits: list[tuple[int, datetime]], old: int, new: int) -> float | None:
    """From epoch ``old``'s last commit to epoch ``new``'s first, once both exist."""
    last = max((at for epoch, at in commits if epoch == old), default=None)
    first = min((at for epoch, at in commits if epoch == new), default=None)
    return None if last is None or first is None else (first - last).total_seconds()


class Cassandra:
    def __init__(self, cluster_id: str) -> None:
        from cassandra.cluster import Cluster

        self.cluster_id = cluster_id

        host, port = CONTACT.rsplit(":", 1)
        self.cluster = Cluster([host], port=int(port))
        self.session = self.cluster.connect()

    def reset(self) -> None:
        """The KPI table, empty, and no checkpoint of an earlier demo run: a pipeline
        re-created under the same name would otherwise resume from it."""
        cql = SCHEMA.read_text().replace("analytics", KEYSPACE)
        for statement in filter(None, (s.strip() for s in _strip_comments(cql).split(";"))):
            self.session.execute(statement, timeout=60)
        self.session.execute(f"TRUNCATE {KEYSPACE}.page_kpis", timeout=60)
        for table in ("checkpoints", "batches", "claims"):
            self.session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{table}", timeout=60)

    def kpis(self) -> Counter[tuple[str, int]]:
        rows = self.session.execute(
            f"SELECT page, window_start, events FROM {KEYSPACE}.page_kpis", timeout=60
        )
        found: Counter[tuple[str, int]] = Counter()
        for row in rows:
            start = row.window_start.replace(tzinfo=UTC)
            found[(row.page, int(start.timestamp()))] += int(row.events)
        return found

    def committed(self) -> dict[int, int] | None:
        try:
            row = self.session.execute(
                f"SELECT offsets FROM {KEYSPACE}.checkpoints WHERE pipeline = %s",
                (cluster.checkpoint_key(self.cluster_id, NAMESPACE, PIPELINE),),
            ).one()
        except Exception:  # the tables appear with the first driver
            return None
        if row is None:
            return None
        offsets = json.loads(row.offsets)
        return {int(p): o for parts in offsets.values() for p, o in parts.items()}

    def handover_gap(self, old: int, new: int) -> float | None:
        """Seconds from epoch ``old``'s last commit to epoch ``new``'s first (the batch
        history), once ``new`` has committed."""
        rows = self.session.execute(
            f"SELECT epoch, committed_at FROM {KEYSPACE}.batches WHERE pipeline = %s",
            (cluster.checkpoint_key(self.cluster_id, NAMESPACE, PIPELINE),),
            timeout=60,
        )
        return gap([(int(r.epoch), r.committed_at) for r in rows], old, new)

    def rows_landed(self) -> int:
        try:
            return sum(self.kpis().values())
        except Exception:  # progress output only
            return 0


class Watch:
    """Waits on the pipeline's status, printing progress every few seconds."""

    def __init__(self, kubectl: Kubectl, cassandra: Cassandra, producer: Background) -> None:
        self.kubectl, self.cassandra, self.producer = kubectl, cassandra, producer
        self.last_print = 0.0

    def until(
        self, done: Callable[[dict[str, Any]], bool], what: str, timeout: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = _pipeline(self.kubectl)
            status = dict((found or {}).get("status") or {})
            if time.monotonic() - self.last_print >= 5:
                self._progress(status)
            if done(status):
                self._progress(status)
                return status
            if time.monotonic() > deadline:
                raise stack.StackError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.5)

    def _progress(self, status: Mapping[str, Any]) -> None:
        self.last_print = time.monotonic()
        commit = status.get("lastCommit") or {}
        say(
            f"    phase {status.get('phase', '-'):<10} epoch {status.get('epoch', '-')}  "
            f"driver {status.get('driverPod', '-')}  last batch {commit.get('batchId', '-')}  "
            f"produced {self.producer.produced:,}  counted in sink "
            f"{self.cassandra.rows_landed():,}"
        )


def _end_offsets(topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "sluice-demo"})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in metadata.partitions
        }
    finally:
        consumer.close()


def _strip_comments(cql: str) -> str:
    return "\n".join(line for line in cql.splitlines() if not line.strip().startswith("--"))
