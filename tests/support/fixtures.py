"""The local stack's fixtures, for the integration and e2e suites: servers brought up
once per test run, on first use, and per-test isolation (a fresh Kafka topic,
Cassandra keyspace or Kubernetes namespace each).

Servers start on first use, so a Kafka test starts only Kafka. Servers already up
(say, left running by ``make demo``) are reused and left running; those the run
started are stopped at its end. ``tests/integration/conftest.py`` and
``tests/e2e/conftest.py`` bring these in.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice_dev import registry
from sluice_dev import stack as local_stack
from sluice_dev.oci import images as oci_images
from sluice_dev.paths import Layout


class StackServers:
    """Starts servers of the local stack on first use, once per test run, and stops
    at the end exactly those it started (a stack left up by ``make demo`` stays up)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.started: set[str] = set()

    def ensure(self, *names: str) -> Layout:
        wanted = local_stack.with_requirements(names)
        down = [s.name for s in wanted if not local_stack.health(s, self.layout).healthy]
        if down:
            local_stack.up(self.layout, down, say=lambda _line: None)
            self.started.update(down)
        return self.layout

    def stop_started(self) -> None:
        """Stops them, then undoes what they leave behind (a real node's containers,
        mounts and namespaces), as ``sluice-dev down`` does."""
        stopped = []
        for server in reversed(local_stack.with_requirements(self.started)):
            if server.name in self.started:
                local_stack.stop(self.layout, server.name)
                stopped.append(server)
        for server in stopped:
            server.cleanup(self.layout)


@pytest.fixture(scope="session")
def servers(layout: Layout) -> Iterator[StackServers]:
    """Set ``SLUICE_KEEP_STACK=1`` to leave started servers running after the run
    (for several test runs at once on one machine, which share the stack's ports)."""
    manager = StackServers(layout)
    yield manager
    if not os.environ.get("SLUICE_KEEP_STACK"):
        manager.stop_started()


@pytest.fixture(scope="session")
def stack(servers: StackServers) -> Layout:
    """Every server of the default local stack (not the optional ones), healthy."""
    return servers.ensure(*(s.name for s in registry.defaults()))


# -- Kafka -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_bootstrap(servers: StackServers) -> str:
    from sluice_dev.servers import kafka

    servers.ensure(kafka.NAME)
    return kafka.BOOTSTRAP


@pytest.fixture
def kafka_topic(
    kafka_bootstrap: str, unique_name: Callable[[str], str]
) -> Iterator[Callable[..., str]]:
    """Factory: ``kafka_topic(partitions=4)`` creates a fresh topic, returns its name
    once every partition has a leader, and deletes the topics after the test."""
    # NewTopic is missing from the package's stubs, not from the package.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from tests.support.waiting import wait_for

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created: list[str] = []

    def make(partitions: int = 4, **config: str) -> str:
        name = unique_name("t")
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
        admin.create_topics([topic], operation_timeout=30)[name].result(timeout=30)
        created.append(name)

        def ready() -> bool:
            found = admin.list_topics(topic=name, timeout=5).topics.get(name)
            if found is None or found.error is not None:
                return False
            leaders = [p.leader for p in found.partitions.values()]
            return len(leaders) == partitions and all(leader >= 0 for leader in leaders)

        wait_for(ready, timeout=30, what=f"topic {name} to have a leader per partition")
        return name

    yield make
    if created:
        for future in admin.delete_topics(created, operation_timeout=30).values():
            future.result(timeout=30)


@pytest.fixture(scope="session")
def kafka_secure(servers: StackServers) -> Any:
    """The broker's ``SASL_SSL`` and ``SSL`` listeners (``tests.support.secure.KafkaSecure``):
    bootstraps, the CA and client certificate as PEM, the fixed PLAIN user and
    ``add_scram_user(name, password, mechanism)``."""
    from sluice_dev import tls
    from sluice_dev.servers import kafka
    from tests.support.secure import KafkaSecure

    files = tls.paths(servers.ensure(kafka.NAME))
    return KafkaSecure(
        sasl_ssl_bootstrap=kafka.SASL_SSL_BOOTSTRAP,
        ssl_bootstrap=kafka.SSL_BOOTSTRAP,
        ca_pem=files.ca.read_text(),
        client_cert_pem=files.client.cert.read_text(),
        client_key_pem=files.client.key.read_text(),
        plain_user=kafka.PLAIN_USER,
        plain_password=kafka.PLAIN_PASSWORD,
        add_scram_user=kafka.add_scram_user,
    )


# -- Cassandra ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def cassandra_contact(servers: StackServers) -> str:
    from sluice_dev import ports

    servers.ensure("cassandra")
    return f"{ports.HOST}:{ports.CASSANDRA_NATIVE}"


@pytest.fixture(scope="session")
def cassandra(cassandra_contact: str) -> Iterator[Any]:
    """A session to the stack's Cassandra node (cassandra-driver)."""
    from sluice_job.cassandra_session import connect

    cluster, session = connect([cassandra_contact], None, timeout=30)
    yield session
    cluster.shutdown()


@pytest.fixture
def cassandra_keyspace(cassandra: Any, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A fresh keyspace (SimpleStrategy, RF 1), dropped after the test."""
    name = unique_name("ks").replace("-", "_")[:48]
    cassandra.execute(
        f"CREATE KEYSPACE {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}",
        timeout=60,
    )
    yield name
    cassandra.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


@pytest.fixture(scope="session")
def cassandra_secure(servers: StackServers) -> Iterator[Any]:
    """The ``cassandra-secure`` node (``tests.support.secure.CassandraSecure``): TLS
    required, passwords, permissions. ``create_role(name, password, keyspace,
    permissions)`` makes a login role; the roles are dropped after the run."""
    from sluice_dev import cql, tls
    from sluice_dev.servers import cassandra_secure as node
    from tests.support.secure import CassandraSecure, cassandra_cluster

    files = tls.paths(servers.ensure(node.NAME))
    ca_pem = files.ca.read_text()
    cluster = cassandra_cluster(node.CONTACT, ca_pem, node.SUPERUSER, node.SUPERUSER_PASSWORD)
    admin = cluster.connect()
    roles: list[str] = []

    def create_role(name: str, password: str, keyspace: str, permissions: Iterable[str]) -> None:
        node.create_role(admin, name, password, keyspace, permissions)
        roles.append(name)

    yield CassandraSecure(
        contact=node.CONTACT,
        superuser=node.SUPERUSER,
        superuser_password=node.SUPERUSER_PASSWORD,
        ca_pem=ca_pem,
        client_cert_pem=files.client.cert.read_text(),
        client_key_pem=files.client.key.read_text(),
        create_role=create_role,
        admin=admin,
    )
    for role in roles:
        admin.execute(f"DROP ROLE IF EXISTS {cql.identifier(role)}")
    cluster.shutdown()


@pytest.fixture
def secure_events_keyspace(
    cassandra_secure: Any, unique_name: Callable[[str], str]
) -> Iterator[str]:
    """A keyspace with the tagged events table on ``cassandra-secure``, made by the
    superuser (roles get their grants with ``create_role``); dropped after the test."""
    from tests.support.transforms import EVENTS_TABLE

    name = unique_name("sec").replace("-", "_")[:48]
    admin = cassandra_secure.admin
    admin.execute(
        f"CREATE KEYSPACE {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}",
        timeout=60,
    )
    admin.execute(EVENTS_TABLE.format(keyspace=name), timeout=60)
    yield name
    admin.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


# -- Datastore ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def datastore_host(servers: StackServers) -> str:
    """``host:port`` of the stack's Datastore API server: a DATASTORE_EMULATOR_HOST."""
    from sluice_dev.servers import datastore

    servers.ensure(datastore.NAME)
    return datastore.HOST


@pytest.fixture
def datastore_project(datastore_host: str, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A Datastore project of this test alone (its data, faults and call counters on the
    shared server), forgotten afterwards."""
    from sluice_dev.datastore import remote

    project = unique_name("ds")
    yield project
    remote.forget(project)


# -- Pub/Sub -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def pubsub_host(servers: StackServers) -> str:
    """``host:port`` of the stack's Pub/Sub server (pstest): a PUBSUB_EMULATOR_HOST."""
    from sluice_dev.servers import pubsub

    servers.ensure(pubsub.NAME)
    return pubsub.HOST


@pytest.fixture
def pubsub(
    pubsub_host: str, unique_name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """A Pub/Sub project of this test alone (``tests.support.pubsub.PubSub``), the
    official client pointed at the stack's server by ``PUBSUB_EMULATOR_HOST``. After
    the test its fault switches are off again and its topics and subscriptions gone."""
    from sluice_dev.pubsub import remote
    from tests.support.pubsub import PubSub

    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_host)
    project = unique_name("ps")
    handle = PubSub(pubsub_host, project)
    yield handle
    handle.close()
    remote.forget(project)


# -- Kubernetes -------------------------------------------------------------------


@pytest.fixture(scope="session")
def kube_stack(servers: StackServers) -> Layout:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler, healthy."""
    return servers.ensure("kube-controller-manager", "kube-scheduler")


@pytest.fixture(scope="module")
def monitoring(servers: StackServers, agent_stack: Layout) -> Layout:
    """The stack's monitoring up (and the node agent's stack it watches; ``make
    provision-monitoring`` builds it); prints how long ``up monitoring`` took."""
    started = time.monotonic()
    layout = servers.ensure("monitoring")
    print(f"\nsluice-dev up monitoring: {time.monotonic() - started:.1f}s")
    return layout


@pytest.fixture(scope="session")
def agent_stack(servers: StackServers, kube_stack: Layout) -> Layout:
    """The control plane plus the stack's node agent (nodes sluice-node-a and -b)."""
    return servers.ensure("node-agent")


@pytest.fixture(scope="session")
def real_workers(servers: StackServers, kube_stack: Layout) -> tuple[Any, ...]:
    """The stack's real nodes (``sluice_dev.realnode``), Ready, holding the job image
    ``make images`` built; skipped unless the session runs in the stack's network
    namespace (``SLUICE_NETNS=1``, ``make test-node``)."""
    from sluice_dev import netns
    from sluice_dev.realnode import images, plan
    from sluice_dev.realnode.servers import kube_proxy_name

    if not netns.ENABLED:
        pytest.skip("real nodes run in the stack's network namespace: SLUICE_NETNS=1")
    servers.ensure(*(kube_proxy_name(index) for index in plan.WORKERS))
    workers = plan.workers(kube_stack)
    for worker in workers:
        images.load(kube_stack, worker, REAL_JOB_IMAGE)
    return workers


REAL_JOB_IMAGE = oci_images.JOB.dev
"""The job image ``make images`` builds, as real nodes run it."""


@pytest.fixture(scope="session")
def core(kube_stack: Layout) -> Any:
    """The core API (kubernetes client ``CoreV1Api``) as the stack's admin."""
    from kubernetes import config
    from kubernetes.client import CoreV1Api

    client = config.new_client_from_config(str(kube_stack.kubeconfig))  # type: ignore[no-untyped-call]
    return CoreV1Api(client)


@pytest.fixture
def namespace(core: Any, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A fresh namespace, deleted after the test."""
    from kubernetes.client import V1Namespace

    name = unique_name("ns")[:63].rstrip("-")
    core.create_namespace(V1Namespace.model_validate({"metadata": {"name": name}}))
    yield name
    core.delete_namespace(name)


@pytest.fixture
def private_agent(kube_stack: Layout, core: Any, tmp_path: Path) -> Iterator[Any]:
    """A node agent of this test alone, with one tainted node it may partition."""
    from tests.support.agents import private_agent as start

    with start(kube_stack, core, tmp_path) as agent:
        yield agent


@pytest.fixture(scope="session")
def custom(kube_stack: Layout) -> Any:
    """The custom-objects API (kubernetes client ``CustomObjectsApi``) as admin."""
    from kubernetes import config
    from kubernetes.client import CustomObjectsApi

    client = config.new_client_from_config(str(kube_stack.kubeconfig))  # type: ignore[no-untyped-call]
    return CustomObjectsApi(client)


@pytest.fixture(scope="session")
def sluice_crd(kube_stack: Layout, custom: Any) -> str:
    """The committed CRD, applied server-side (as ``kubectl apply`` users do),
    Established and served. Left installed: other tests and sessions share it."""
    import subprocess

    from kubernetes import config
    from kubernetes.client import ApiextensionsV1Api
    from kubernetes.client.exceptions import ApiException

    from sluice_dev.paths import REPO_ROOT
    from sluice_dev.servers import kube
    from sluice_operator import crd, naming
    from tests.support.waiting import wait_for

    path = REPO_ROOT / "crds" / "streamingpipelines.sluice.dev.yaml"
    applied = subprocess.run(
        [
            str(kube.kubectl(kube_stack)),
            f"--kubeconfig={kube_stack.kubeconfig}",
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=sluice-tests",
            "-f",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    client = config.new_client_from_config(str(kube_stack.kubeconfig))  # type: ignore[no-untyped-call]
    extensions = ApiextensionsV1Api(client)

    def established() -> bool:
        status = extensions.read_custom_resource_definition(crd.NAME).status
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    def served() -> bool:  # 404/429 for a moment after Established
        try:
            custom.list_cluster_custom_object(naming.GROUP, naming.VERSION, naming.PLURAL)
        except ApiException:
            return False
        return True

    wait_for(established, timeout=60, what=f"CRD {crd.NAME} Established")
    wait_for(served, timeout=60, what="the StreamingPipeline API to be served")
    return crd.NAME


@pytest.fixture(scope="session")
def standin_image(agent_stack: Layout) -> str:
    """Pods of this image run the stand-in driver (tests/support/standin)."""
    from sluice_dev.servers import nodeagent
    from tests.support.operator import STANDIN_IMAGE, STANDIN_ROOT

    nodeagent.register_image(agent_stack, STANDIN_IMAGE, STANDIN_ROOT)
    return STANDIN_IMAGE


@pytest.fixture
def operators(kube_stack: Layout, namespace: str, tmp_path: Path) -> Iterator[Any]:
    """Starts operator processes watching the test's namespace; kills them after."""
    from tests.support.operator import Operators

    started = Operators(kube_stack, namespace, tmp_path)
    yield started
    started.stop_all()


@pytest.fixture
def pipeline(sluice_crd: str, custom: Any, core: Any, namespace: str) -> Any:
    """A StreamingPipeline name in the test's namespace, with API helpers."""
    from tests.support.operator import Pipeline

    return Pipeline(custom, core, namespace, "kpis")


# -- the driver --------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark_jars(layout: Layout) -> tuple[Path, ...]:
    from sluice_dev import stack as provisioning
    from sluice_dev.servers.spark import NAME, spark_jars

    provisioning.provision(layout, [NAME], say=lambda _line: None)
    return tuple(spark_jars(layout))


@pytest.fixture(scope="session")
def job_image_env(layout: Layout) -> dict[str, str]:
    """The job image's Spark environment on the node agent: the Kafka jars and the
    drivers' class archive, provisioned."""
    from sluice_dev.servers.spark import job_image_env

    return job_image_env(layout)


@pytest.fixture(scope="session")
def spark_session(spark_jars: tuple[Path, ...]) -> Iterator[Any]:
    """A local[2] SparkSession with Spark's Kafka source, bound to loopback only.
    Python workers run this interpreter, so they import the project's packages."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sluice-tests")
        .config("spark.jars", ",".join(str(jar) for jar in spark_jars))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture
def events_table(cassandra: Any, cassandra_keyspace: str) -> str:
    """The tagged events table in the test's keyspace; returns the keyspace."""
    from tests.support.transforms import EVENTS_TABLE

    cassandra.execute(EVENTS_TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    return cassandra_keyspace


@pytest.fixture
def driver(
    tmp_path: Path, job_image_env: dict[str, str], unique_name: Callable[[str], str]
) -> Iterator[Any]:
    """Starts real driver processes for one pipeline; kills leftovers afterwards."""
    from tests.support.driver import Driver

    harness = Driver(tmp_path, unique_name("p")[:50], image_env=job_image_env)
    yield harness
    harness.stop_all()


@pytest.fixture(scope="session")
def driver_cluster_role(kube_stack: Layout, helm_binary: Path, sluice_crd: str) -> str:
    """What ``helm install sluice`` creates for drivers with executor pods: the driver
    ClusterRole they are bound to and the admission policies confining them to their own
    executor pods and those to their pipeline's Secrets (in force in every namespace;
    the second reads StreamingPipelines, so after the CRD, as helm installs it), rendered
    by helm and applied as the admin (``sluice_dev.localcluster``). Returns the
    ClusterRole's name."""
    from sluice_dev.kubectl import Kubectl
    from sluice_dev.localcluster import apply_driver_rights
    from sluice_operator.builders import DRIVER_CLUSTER_ROLE

    apply_driver_rights(kube_stack, Kubectl(kube_stack), DRIVER_CLUSTER_ROLE)
    return DRIVER_CLUSTER_ROLE
