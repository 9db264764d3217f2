"""Pipelines of real drivers under the chart's monitoring, for the alert and
dashboard tests: the chart installed with its PodMonitor, ServiceMonitor and
PrometheusRule, its operator (the chart's Deployment, scraped as
``job="sluice-operator"``) serving a namespace of e2e pipelines whose drivers run the
e2e job images on private node-agent nodes, grouped in pools so that a node fault in
one pool touches only the pipelines placed there.

The operator is the chart's own pod, not a process the test starts: the
ServiceMonitor scrapes it, so ``SluiceOperatorDown`` and every ``sluice_operator_*``
series the alerts read come from what a cluster would run."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cassandra.cluster import NoHostAvailable
from kubernetes import config
from kubernetes.client import AppsV1Api, CoreV1Api, CustomObjectsApi, V1Namespace

from sluice_dev.events import EventFactory
from sluice_dev.monitoring import client
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.produce import Background
from sluice_dev.servers import nodeagent
from tests.support import agents, kpis
from tests.support.e2e import JOB_IMAGE, job_images, manifest
from tests.support.helm import CHART
from tests.support.helm import runner as helm_runner
from tests.support.operator import Pipeline
from tests.support.pubsub import Publishing, PubSub
from tests.support.transforms import EVENTS_TABLE
from tests.support.waiting import wait_for

OPERATOR_IMAGE = "sluice-test/operator"
SCRAPE_INTERVAL = "5s"
"""The chart's monitors scrape every 5 s, as the stack's Prometheus evaluates."""
POOL_LABEL = "sluice.dev/pool"
KPI_ENTRYPOINT = "sluice_job.examples.kpi:transform"
"""The KPI example's transform (in the job image): a Pub/Sub member's."""


def operator_root(where: Path) -> Path:
    """What Dockerfile.operator installs, from this checkout (as test_helm.py does)."""
    where.mkdir(parents=True)
    for package in ("operator/sluice_operator", "api/sluice_api"):
        (where / Path(package).name).symlink_to(REPO_ROOT / package)
    return where


def chart_values(watched: str, port: int, tag: str) -> list[str]:
    """One operator replica of image ``OPERATOR_IMAGE:tag`` serving ``watched``, its
    pods allowed into the tests' pools, and every monitoring object of the chart on,
    scraping every 5 s."""
    return [
        f"--set=image.repository={OPERATOR_IMAGE}",
        f"--set=image.tag={tag}",
        "--set=replicaCount=1",
        f"--set=watchNamespaces={{{watched}}}",
        f"--set=operator.port={port}",
        f"--set=operator.podPolicy.nodeLabels={{{POOL_LABEL}}}",
        f"--set=operator.podPolicy.tolerationKeys={{{agents.ISOLATION_TAINT}}}",
        "--set=strategy.rollingUpdate.maxSurge=0",
        "--set=strategy.rollingUpdate.maxUnavailable=1",
        "--set=metrics.serviceMonitor.enabled=true",
        f"--set=metrics.serviceMonitor.interval={SCRAPE_INTERVAL}",
        "--set=metrics.podMonitor.enabled=true",
        f"--set=metrics.podMonitor.interval={SCRAPE_INTERVAL}",
        "--set=prometheusRule.enabled=true",
    ]


def merged(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, key by key (a JSON merge patch's rule)."""
    out = copy.deepcopy(dict(base))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class Member:
    """One pipeline of the fleet: its API handle, topic, keyspace and producer."""

    pipeline: Pipeline
    topic: str
    keyspace: str
    bootstrap: str
    production: Background | None = None
    publishing: Publishing | None = None
    """Its Pub/Sub production (a Pub/Sub source)."""
    sink_keyspace: str | None = None
    """The keyspace of its sink, when not its checkpoint's."""

    @property
    def name(self) -> str:
        return self.pipeline.name

    @property
    def key(self) -> str:
        """Its ``pipeline`` label: ``<namespace>/<name>``."""
        return f"{self.pipeline.namespace}/{self.pipeline.name}"

    def produce(self, rate: float, count: int = 1_000_000, seed: int = 7) -> Background:
        self.production = Background(
            self.bootstrap, self.topic, count, rate, EventFactory(seed=seed)
        ).start()
        return self.production

    def stop_producing(self) -> None:
        if self.production is not None:
            self.production.stop()
        if self.publishing is not None and self.publishing.running:
            self.publishing.finish()


@dataclass
class Fleet:
    layout: Layout
    core: CoreV1Api
    custom: CustomObjectsApi
    apps: AppsV1Api
    release: str
    release_namespace: str
    namespace: str
    """Where the pipelines run (the operator watches it)."""
    pools: dict[str, list[agents.PrivateAgent]]
    """Each pool's nodes, by the pool's name in the test."""
    pool_labels: dict[str, str]
    """Each pool's ``sluice.dev/pool`` value (unique to this fleet)."""
    bootstrap: str
    contact: str
    cassandra: Any
    make_topic: Callable[..., str]
    members: list[Member] = field(default_factory=list)

    def spec(self, name: str, pool: str, version: str = "v1") -> dict[str, Any]:
        topic = "unused"
        built = manifest(
            name,
            self.namespace,
            image=f"{JOB_IMAGE}:{version}",
            bootstrap=self.bootstrap,
            topic=topic,
            contact=self.contact,
            keyspace="unused",
            pool=self.pool_labels[pool],
            toleration=agents.ISOLATION_TAINT,
        )
        return dict(built["spec"])

    def add(self, name: str, pool: str, version: str = "v1", **changes: Any) -> Member:
        """A new pipeline ``name`` in ``pool``, with a topic of four partitions, a
        keyspace with the events table, and the e2e spec with ``changes`` merged in."""
        topic = self.make_topic(partitions=4)
        keyspace = self._keyspace(name, EVENTS_TABLE)
        spec = self.spec(name, pool, version)
        spec["source"]["kafka"]["topics"] = [topic]
        for part in ("sink", "checkpoint"):
            spec[part]["cassandra"]["keyspace"] = keyspace
        member = Member(
            Pipeline(self.custom, self.core, self.namespace, name), topic, keyspace, self.bootstrap
        )
        return self._create(member, merged(spec, changes))

    def add_pubsub(self, name: str, pool: str, pubsub: PubSub, **changes: Any) -> Member:
        """A new pipeline ``name`` in ``pool`` reading a new subscription of ``pubsub``
        (lease 60 s) with the KPI example's transform, its ``page_kpis`` in a sink
        keyspace of its own and its checkpoint in another, ``changes`` merged in.
        ``member.publishing`` publishes to its topic."""
        topic = pubsub.topic()
        subscription = pubsub.subscription(topic, ack_deadline_seconds=60)
        checkpoint = self._keyspace(name, None)
        sink = self._keyspace(f"{name}_sink", kpis.TABLE)
        spec = self.spec(name, pool)
        spec["source"] = {
            "pubsub": {
                "project": pubsub.project,
                "subscription": subscription.rsplit("/", 1)[-1],
                "endpoint": pubsub.host,
                "maxMessagesPerBatch": 1_000,
                "ackDeadlineSeconds": 60,
            }
        }
        spec["transform"] = {"entrypoint": KPI_ENTRYPOINT, "options": {"windowSeconds": 60}}
        spec["sink"]["cassandra"].update(keyspace=sink, table="page_kpis")
        spec["checkpoint"]["cassandra"]["keyspace"] = checkpoint
        member = Member(
            Pipeline(self.custom, self.core, self.namespace, name),
            topic,
            checkpoint,
            self.bootstrap,
            sink_keyspace=sink,
        )
        return self._create(member, merged(spec, changes))

    def _keyspace(self, name: str, table: str | None) -> str:
        keyspace = f"al_{name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        self.cassandra.execute(
            f"CREATE KEYSPACE {keyspace} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}",
            timeout=60,
        )
        if table is not None:
            self.cassandra.execute(table.format(keyspace=keyspace), timeout=60)
        return keyspace

    def _create(self, member: Member, spec: dict[str, Any]) -> Member:
        member.pipeline.create(spec)
        self.members.append(member)
        return member

    def remove(self, member: Member) -> None:
        """Stop producing and delete the pipeline while the operator runs (its driver
        stops cleanly), waiting until it is gone."""
        member.stop_producing()
        if member.pipeline.get() is not None:
            member.pipeline.delete()
        wait_for(lambda: member.pipeline.get() is None, timeout=180, what=f"{member.name} gone")

    def scale_operator(self, replicas: int) -> None:
        """The chart's operator Deployment scaled to ``replicas``; returns once its
        pods are that many running ones (0: every one gone)."""
        deployments: Any = self.apps.list_namespaced_deployment(
            self.release_namespace, label_selector=f"app.kubernetes.io/instance={self.release}"
        )
        [deployment] = deployments.items
        self.apps.patch_namespaced_deployment_scale(
            deployment.metadata.name, self.release_namespace, {"spec": {"replicas": replicas}}
        )

        selector = f"app.kubernetes.io/instance={self.release},app.kubernetes.io/component=operator"

        def settled() -> bool:
            # Terminating pods too: one still answers scrapes until its process exits.
            pods: Any = self.core.list_namespaced_pod(
                self.release_namespace, label_selector=selector
            )
            running = [p for p in pods.items if p.status.phase == "Running"]
            live = [p for p in running if p.metadata.deletion_timestamp is None]
            return len(pods.items) == len(live) == replicas

        wait_for(settled, timeout=180, what=f"{replicas} operator pod(s) running, none other")

    def wait_monitored(self, prometheus_url: str, timeout: float = 300) -> None:
        """Until Prometheus scrapes the release's operator (``up`` 1) and has loaded
        its PrometheusRule: a fault before that is not one Prometheus could see."""

        def seen() -> bool:
            up = client.query(
                prometheus_url,
                f'up{{job="sluice-operator", namespace="{self.release_namespace}"}} == 1',
            )
            files = {group.get("file", "") for group in client.rule_groups(prometheus_url)}
            return bool(up) and any(self.release_namespace in name for name in files)

        wait_for(
            seen,
            timeout=timeout,
            interval=1.0,
            what="the release's operator scraped and its rules loaded",
            ignoring=(client.ApiError,),
        )

    def cleanup(self) -> None:
        for member in self.members:
            member.stop_producing()
        for member in self.members:
            if member.pipeline.get() is not None:
                member.pipeline.delete()
        for member in self.members:
            wait_for(
                lambda m=member: m.pipeline.get() is None,  # type: ignore[misc]
                timeout=180,
                what=f"{member.name} deleted",
            )
        try:
            for member in self.members:
                for keyspace in (member.keyspace, member.sink_keyspace):
                    if keyspace is not None:
                        self.cassandra.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        except NoHostAvailable as err:
            # The session of sluice_job.cassandra_session.connect never reconnects after
            # an outage of more than ~2 min (docs/alerts.md); the keyspaces stay behind.
            print(f"keyspaces of the fleet left behind: {err}")


def _namespace(core: CoreV1Api, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(V1Namespace.model_validate({"metadata": {"name": name}}))
    return name


@dataclass(frozen=True)
class Release:
    """The chart installed with monitoring: its name and namespace, and the
    namespace its operator serves."""

    name: str
    namespace: str
    watched: str


@contextmanager
def chart_release(
    layout: Layout, helm_binary: Path, core: CoreV1Api, workdir: Path
) -> Iterator[Release]:
    """The chart (its operator the checkout's code) installed with every monitoring
    object on, serving a fresh namespace; uninstalled afterwards, both namespaces
    deleted (delete the pipelines first, while the operator runs)."""
    release = Release(
        f"sl-{uuid.uuid4().hex[:6]}", _namespace(core, "mon-op"), _namespace(core, "mon")
    )
    # A tag of the release's own: the image map is the stack's, and another session's
    # release of the same name would point it at that session's directory (pytest
    # deletes a finished session's directories).
    image = f"{OPERATOR_IMAGE}:{release.name}"
    nodeagent.register_image(layout, image, operator_root(workdir / "operator-image"))
    helm = helm_runner(helm_binary, layout, workdir)
    try:
        helm(
            "install",
            release.name,
            str(CHART),
            "-n",
            release.namespace,
            "--wait",
            "--timeout=180s",
            *chart_values(release.watched, agents.free_port(), release.name),
        )
        yield release
    finally:
        try:
            helm("uninstall", release.name, "-n", release.namespace, "--wait", "--timeout=180s")
        finally:
            for namespace in (release.watched, release.namespace):
                core.delete_namespace(namespace)


@contextmanager
def fleet(
    layout: Layout,
    *,
    helm_binary: Path,
    core: CoreV1Api,
    custom: CustomObjectsApi,
    bootstrap: str,
    contact: str,
    cassandra: Any,
    make_topic: Callable[..., str],
    job_image_env: Mapping[str, str],
    workdir: Path,
    pools: Mapping[str, int],
) -> Iterator[Fleet]:
    """:func:`chart_release`, and ``pools`` of private nodes (name → node count)
    holding the e2e job images. Afterwards the pipelines are deleted (while the
    operator runs), the chart uninstalled and the nodes stopped."""
    api = config.new_client_from_config(str(layout.kubeconfig))  # type: ignore[no-untyped-call]
    images = job_images(workdir, job_image_env)
    with ExitStack() as stack:
        nodes: dict[str, list[agents.PrivateAgent]] = {}
        labels = {pool: f"{pool}-{uuid.uuid4().hex[:6]}" for pool in pools}
        for pool, count in pools.items():
            nodes[pool] = [
                stack.enter_context(
                    agents.private_agent(
                        layout, core, workdir, labels={POOL_LABEL: labels[pool]}, images=images
                    )
                )
                for _ in range(count)
            ]
        release = stack.enter_context(chart_release(layout, helm_binary, core, workdir))
        made = Fleet(
            layout,
            core,
            custom,
            AppsV1Api(api),
            release.name,
            release.namespace,
            release.watched,
            nodes,
            labels,
            bootstrap,
            contact,
            cassandra,
            make_topic,
        )
        try:
            yield made
        finally:
            made.scale_operator(1)
            made.cleanup()
