"""The Helm chart, rendered by the provisioned ``helm`` without a cluster: it lints
clean in every ci/ scenario, documents and types every value, renders a hardened
operator Deployment with leader election, least-privilege RBAC in both modes (which
still covers what the operator grants its drivers), and the optional monitoring
objects only when asked, with the same alerts promtool tests."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_api.pod import VOLUME_SOURCES
from sluice_api.status import PipelineStatus
from sluice_dev.paths import REPO_ROOT
from sluice_operator import cli, naming

pytestmark = pytest.mark.unit

CHART = REPO_ROOT / "charts" / "sluice"
SCENARIOS = sorted((CHART / "ci").glob("*-values.yaml"))
Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="module")
def render(helm_binary: Path) -> Render:
    def run(*values: str, files: Iterable[Path] = ()) -> list[dict[str, Any]]:
        argv = [str(helm_binary), "template", "rel", str(CHART), "--namespace", "sluice-system"]
        argv += [f"--values={f}" for f in files]
        argv += [f"--set={v}" for v in values]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

    return run


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


# -- lint and values -------------------------------------------------------------------


@pytest.mark.parametrize("scenario", [None, *SCENARIOS], ids=lambda s: s.name if s else "default")
def test_helm_lint_is_clean(helm_binary: Path, scenario: Path | None) -> None:
    argv = [str(helm_binary), "lint", "--strict", str(CHART)]
    if scenario is not None:
        argv.append(f"--values={scenario}")
    linted = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "[WARNING]" not in linted.stdout, linted.stdout
    assert "[ERROR]" not in linted.stdout, linted.stdout
    assert "0 chart(s) failed" in linted.stdout


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    return loaded


def test_every_value_has_a_comment_and_a_schema_entry() -> None:
    """A key needs a comment unless it sits inside a free-form object value (e.g.
    securityContext's own fields), which the comment above that object describes."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, str]] = []
    undocumented, unknown = [], []
    for number, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z_][\w-]*):", line)
        if not match or line.lstrip().startswith("-"):
            continue
        indent, key = len(match[1]), match[2]
        stack = [(i, k) for i, k in stack if i < indent]
        path = [k for _, k in stack] + [key]
        stack.append((indent, key))
        node: Mapping[str, Any] | None = schema()
        for part in path[:-1]:
            node = (node or {}).get("properties", {}).get(part)
        if node is None or "properties" not in node:
            continue  # inside a free-form value
        if key not in node["properties"]:
            unknown.append(".".join(path))
        previous = lines[number - 1].strip() if number else ""
        if not previous.startswith("#"):
            undocumented.append(".".join(path))
    assert not undocumented, f"values.yaml keys without a comment: {undocumented}"
    assert not unknown, f"values.yaml keys missing from values.schema.json: {unknown}"


def test_the_schema_rejects_a_misspelt_or_mistyped_value(helm_binary: Path) -> None:
    for bad in ("replicas=3", "replicaCount=zero", "watchNamespaces[0]=Not_A_Namespace"):
        done = subprocess.run(
            [str(helm_binary), "template", "rel", str(CHART), f"--set={bad}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode != 0, bad
        assert "values don't meet the specifications of the schema" in done.stderr, done.stderr


def test_more_than_one_replica_without_leader_election_is_refused(helm_binary: Path) -> None:
    done = subprocess.run(
        [str(helm_binary), "template", "rel", str(CHART), "--set=leaderElection.enabled=false"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "leaderElection.enabled=false needs replicaCount=1" in done.stderr


# -- the Deployment --------------------------------------------------------------------


def test_defaults_render_only_the_operator_and_its_rbac(render: Render) -> None:
    kinds = sorted(d["kind"] for d in render())
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ClusterRole",  # cluster reads
            "ClusterRoleBinding",
            "ClusterRole",  # the driver's, bound per pipeline by the operator
            "Role",  # pipelines in the release namespace
            "RoleBinding",
            "Role",  # the Lease
            "RoleBinding",
            "Service",
            "Deployment",
            "PodDisruptionBudget",
            "Pod",  # the `helm test` hook
            "NetworkPolicy",  # drivers
            "NetworkPolicy",  # executors
            "ValidatingAdmissionPolicy",  # drivers' tokens: their own executor pods only
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicy",  # executor pods: their pipeline's Secrets only
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicy",  # Secrets: only the platform consents
            "ValidatingAdmissionPolicyBinding",
        ]
    )


def test_helm_test_asks_an_operator_replica_for_healthz_from_a_hardened_pod(
    render: Render,
) -> None:
    pod = one(render(), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "helm-test"
    assert pod["spec"]["restartPolicy"] == "Never"
    [container] = pod["spec"]["containers"]
    assert container["args"] == ["http://rel-sluice.sluice-system.svc:8080/healthz"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    moved = one(render("tests.url=http://127.0.0.1:9/healthz"), "Pod")
    assert moved["spec"]["containers"][0]["args"] == ["http://127.0.0.1:9/healthz"]


def test_the_chart_readme_lists_every_value_as_values_yaml_documents_it() -> None:
    from sluice_dev import chartdocs

    readme = (CHART / "README.md").read_text()
    values = (CHART / "values.yaml").read_text()
    assert readme == chartdocs.readme(readme, values), (
        "charts/sluice/README.md is stale: run .venv/bin/python -m sluice_dev.chartdocs --write"
    )
    assert all(f"| `{key}` |" in readme for key, _ in chartdocs.documented(values))


def test_two_replicas_elect_a_leader_with_the_operators_lease(render: Render) -> None:
    deployment = one(render(), "Deployment")
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "sluice_operator"]
    assert "--namespace=sluice-system" in container["args"]  # namespaced by default
    assert "--all-namespaces" not in container["args"]
    assert "--lease-namespace=sluice-system" in container["args"]
    assert "--http-port=8080" in container["args"]
    assert "--no-leader-election" not in container["args"]


def test_probes_use_healthz_so_standbys_are_ready(render: Render) -> None:
    container = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_the_pod_is_hardened_and_its_memory_bounded(render: Render) -> None:
    pod = one(render(), "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    assert container["resources"]["requests"] == {"cpu": "50m", "memory": "128Mi"}


def test_a_digest_pins_the_image(render: Render) -> None:
    digest = "sha256:" + "ab" * 32
    pod = one(render(f"image.digest={digest}"), "Deployment")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == f"ghcr.io/sluice-dev/sluice-operator@{digest}"


# -- RBAC ------------------------------------------------------------------------------


def granted(rules: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples of rules that are not limited by name."""
    return {
        (group, resource, verb)
        for rule in rules
        if not rule.get("resourceNames")
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


# What the operator's code calls in a watched namespace (kube.py, handlers via kopf).
OPERATOR_CALLS = {
    ("sluice.dev", "streamingpipelines", "get"),
    ("sluice.dev", "streamingpipelines", "list"),
    ("sluice.dev", "streamingpipelines", "watch"),
    ("sluice.dev", "streamingpipelines", "patch"),
    ("sluice.dev", "streamingpipelines/status", "patch"),
    ("sluice.dev", "streamingpipelines/finalizers", "update"),  # blockOwnerDeletion
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods", "create"),
    ("", "pods", "delete"),
    ("", "services", "create"),
    ("", "services", "get"),  # one that exists: is it this pipeline's? (kube.ensure)
    ("", "serviceaccounts", "create"),
    ("", "serviceaccounts", "get"),
    ("", "secrets", "get"),  # labels only (consent.py), asked as PartialObjectMetadata
    ("", "secrets", "create"),  # Spark's RPC secret of a pipeline with executors
    ("", "configmaps", "get"),  # envFrom's key names (envfrom.py)
    ("rbac.authorization.k8s.io", "rolebindings", "create"),
    ("rbac.authorization.k8s.io", "rolebindings", "get"),
    ("", "events", "create"),
}
# What Spark's Kubernetes backend does from a driver that runs executor pods.
DRIVER_GRANTS = {
    ("", "pods", verb)
    for verb in ("create", "get", "list", "watch", "delete", "deletecollection", "patch")
}
"""Executor pods only: no ConfigMap, no volume claim, no Service (client mode)."""
BIND_DRIVER_ROLE = {
    "apiGroups": ["rbac.authorization.k8s.io"],
    "resources": ["clusterroles"],
    "resourceNames": ["rel-sluice-driver"],
    "verbs": ["bind"],
}
CLUSTER_READS = {
    ("", "nodes", "get"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
}


def test_namespaced_mode_grants_pipeline_rights_only_in_watched_namespaces(
    render: Render,
) -> None:
    docs = render(files=[CHART / "ci" / "namespaced-values.yaml"])
    roles = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "Role"}
    assert set(roles) == {"analytics", "payments", "sluice-system"}
    for namespace in ("analytics", "payments"):
        assert granted(roles[namespace]["rules"]) == OPERATOR_CALLS
        assert BIND_DRIVER_ROLE in roles[namespace]["rules"]
        binding = one(
            [d for d in docs if d["metadata"].get("namespace") == namespace], "RoleBinding"
        )
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "rel-sluice", "namespace": "sluice-system"}
        ]
    assert granted(one(docs, "ClusterRole", "rel-sluice-cluster")["rules"]) == CLUSTER_READS
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=analytics" in args
    assert "--namespace=payments" in args
    assert "--all-namespaces" not in args


def test_the_default_install_serves_its_own_namespace_only(render: Render) -> None:
    """Cluster-wide rights are an explicit choice (clusterWide), never the default."""
    docs = render()
    roles = [d for d in docs if d["kind"] == "Role" and "leader" not in d["metadata"]["name"]]
    assert [r["metadata"]["namespace"] for r in roles] == ["sluice-system"]
    assert granted(roles[0]["rules"]) == OPERATOR_CALLS
    cluster_roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    assert set(cluster_roles) == {"rel-sluice-cluster", "rel-sluice-driver"}
    assert granted(cluster_roles["rel-sluice-cluster"]["rules"]) == CLUSTER_READS
    bound = {d["roleRef"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"}
    assert bound == {"rel-sluice-cluster"}  # the driver ClusterRole is bound per pipeline


def test_cluster_mode_grants_the_same_rules_cluster_wide(render: Render) -> None:
    docs = render("clusterWide=true")
    everywhere = one(docs, "ClusterRole", "rel-sluice")
    assert granted(everywhere["rules"]) == OPERATOR_CALLS
    assert BIND_DRIVER_ROLE in everywhere["rules"]
    assert granted(one(docs, "ClusterRole", "rel-sluice-cluster")["rules"]) == CLUSTER_READS
    assert not [d for d in docs if d["kind"] == "Role" and "leader" not in d["metadata"]["name"]]
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" in args


READ_KUBE_SYSTEM = {
    "apiGroups": [""],
    "resources": ["namespaces"],
    "resourceNames": ["kube-system"],
    "verbs": ["get"],
}
"""The cluster id (clusterid.py): the UID of kube-system, read by name, nothing else."""


def test_the_cluster_id_is_read_from_kube_system_alone_unless_the_platform_names_it(
    render: Render,
) -> None:
    for values in ((), ("clusterWide=true",)):
        rules = one(render(*values), "ClusterRole", "rel-sluice-cluster")["rules"]
        named = [rule for rule in rules if rule.get("resourceNames")]
        assert named == [READ_KUBE_SYSTEM]
        assert ("", "namespaces", "get") not in granted(rules)  # no other Namespace
    docs = render("operator.clusterName=eu-west-1.prod")
    rules = one(docs, "ClusterRole", "rel-sluice-cluster")["rules"]
    assert READ_KUBE_SYSTEM not in rules
    assert granted(rules) == CLUSTER_READS
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--cluster-name=eu-west-1.prod" in args


def test_a_login_must_say_where_it_may_go_unless_the_platform_lets_it_go_anywhere(
    render: Render,
) -> None:
    """operator.requireSecretEndpoints reaches the operator as --require-secret-endpoints
    (consent.py). Issue 38, finding 8: it was off by default, so a labelled login with
    no sluice.dev/allowed-endpoints annotation went wherever a tenant's manifest said."""

    def args(*values: str) -> list[str]:
        deployment = one(render(*values), "Deployment")
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    assert "--require-secret-endpoints" in args()
    assert "--require-secret-endpoints" not in args("operator.requireSecretEndpoints=false")


def test_the_pod_policy_reaches_the_operator_and_allows_nothing_by_default(
    render: Render, helm_binary: Path
) -> None:
    """operator.podPolicy reaches the operator as its --allowed-* flags (podpolicy.py).
    Issue 38, finding 6. Reproduction on the old chart: with podPolicy set, helm
    template failed (the schema has additionalProperties false), and no --allowed-*
    argument existed."""

    def args(*values: str) -> list[str]:
        deployment = one(render(*values), "Deployment")
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    assert not [a for a in args() if a.startswith("--allowed-")]
    given = args(
        "operator.podPolicy.priorityClasses={pipelines-high,pipelines-low}",
        "operator.podPolicy.tolerationKeys={dedicated}",
        "operator.podPolicy.nodeLabels={pool,zone=eu-1}",
        "operator.podPolicy.labelKeys={team,example.com/*}",
        "operator.podPolicy.annotationKeys={example.com/*}",
    )
    assert [a for a in given if a.startswith("--allowed-")] == [
        "--allowed-priority-classes=pipelines-high,pipelines-low",
        "--allowed-toleration-keys=dedicated",
        "--allowed-node-labels=pool,zone=eu-1",
        "--allowed-pod-labels=team,example.com/*",
        "--allowed-pod-annotations=example.com/*",
    ]
    policy = cli.pod_policy(cli.parser().parse_args(given))
    assert policy.node_labels == frozenset({"pool", "zone=eu-1"})
    assert policy.annotation_keys == ("example.com/*",)
    done = subprocess.run(
        [
            str(helm_binary),
            "template",
            "rel",
            str(CHART),
            "--set=operator.podPolicy.labelKeys={a*b}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "labelKeys" in done.stderr


def test_the_spark_ui_stays_on_loopback_unless_the_platform_puts_it_on_the_network(
    render: Render,
) -> None:
    def args(*values: str) -> list[str]:
        deployment = one(render(*values), "Deployment")
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    assert "--spark-ui-on-network" not in args()
    assert "--spark-ui-on-network" in args("operator.sparkUiOnNetwork=true")


def test_a_cluster_name_that_cannot_key_a_checkpoint_is_refused(helm_binary: Path) -> None:
    done = subprocess.run(
        [str(helm_binary), "template", "rel", str(CHART), "--set=operator.clusterName=EU/west"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "clusterName" in done.stderr


def test_the_operator_holds_none_of_the_rights_it_gives_a_driver(render: Render) -> None:
    """It binds the shipped driver ClusterRole (bind on that one name) instead of
    holding every verb it hands out, as a Role's creator otherwise must."""
    docs = render()
    driver = one(docs, "ClusterRole", "rel-sluice-driver")
    assert granted(driver["rules"]) == DRIVER_GRANTS
    operator = one(docs, "Role", "rel-sluice")
    held = granted(operator["rules"])
    own_driver_pods = {("", "pods", v) for v in ("create", "list", "watch", "delete")}
    assert held & DRIVER_GRANTS == own_driver_pods
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--driver-cluster-role=rel-sluice-driver" in args


def test_the_lease_is_the_only_object_the_operator_updates(render: Render) -> None:
    role = one(render(), "Role", "rel-sluice-leader-election")
    assert role["metadata"]["namespace"] == "sluice-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["sluice-operator"],
            "verbs": ["get", "update"],
        },
    ]
    rules = [r for d in render() if "rules" in d for r in d["rules"]]
    assert not {verb for r in rules for verb in r["verbs"]} & {"*", "escalate", "impersonate"}
    assert [r for r in rules if "bind" in r["verbs"]] == [BIND_DRIVER_ROLE]


# -- monitoring --------------------------------------------------------------------------


def test_monitoring_objects_are_off_by_default_and_render_when_enabled(render: Render) -> None:
    off = {d["kind"] for d in render()}
    assert not off & {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}
    on = render(files=[CHART / "ci" / "monitoring-values.yaml"])
    monitor = one(on, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
    assert monitor["spec"]["endpoints"][0]["relabelings"][0]["replacement"] == "sluice-operator"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    drivers = one(on, "PodMonitor")
    assert drivers["spec"]["selector"]["matchLabels"]["sluice.dev/role"] == "driver"
    assert drivers["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    # Issue 38, finding 8: no limit before, so one driver could exhaust Prometheus.
    assert drivers["spec"]["sampleLimit"] == 20000
    assert drivers["spec"]["labelLimit"] == 30
    assert drivers["spec"]["labelNameLengthLimit"] == 128
    assert drivers["spec"]["labelValueLengthLimit"] == 512
    assert drivers["spec"]["bodySizeLimit"] == "4MB"
    service = one(on, "Service")
    assert service["spec"]["ports"][0]["name"] == "http-metrics"


def test_the_prometheus_rule_carries_the_promtool_tested_rules(render: Render) -> None:
    base = "https://runbooks.example.com/sluice.md"
    rule = one(
        render(
            f"prometheusRule.runbookBaseUrl={base}",
            files=[CHART / "ci" / "monitoring-values.yaml"],
        ),
        "PrometheusRule",
    )
    plain = (CHART / "files" / "alerts.yaml").read_text()
    expected = yaml.safe_load(
        plain.replace("https://github.com/sluice-dev/sluice/blob/main/docs/alerts.md", base)
    )
    assert rule["spec"]["groups"] == expected["groups"]
    urls = [r["annotations"]["runbook_url"] for r in rule["spec"]["groups"][0]["rules"]]
    assert all(url.startswith(f"{base}#sluice") for url in urls)


def test_the_grafana_dashboard_is_a_sidecar_configmap_with_the_issue_s_panels(
    render: Render,
) -> None:
    docs = render(files=[CHART / "ci" / "monitoring-values.yaml"])
    config_map = one(docs, "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["sluice.json"])
    text = json.dumps(dashboard["panels"])
    for series in (
        "sluice_records_in_total",
        "sluice_consumer_lag",
        "sluice_batch_phase_seconds_bucket",
        "sluice_batches_total",
        "sluice_operator_pipeline_restarts",
        "sluice_commit_conflicts_total",
        'reason=~\\"Fenced|NodeLost\\"',
    ):
        assert series in text, series
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource", "pipeline"]


# -- network ---------------------------------------------------------------------------


def test_driver_pods_take_ingress_only_from_the_operator_prometheus_and_their_executors(
    render: Render,
) -> None:
    docs = render(files=[CHART / "ci" / "namespaced-values.yaml"])
    policies = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): d["spec"]
        for d in docs
        if d["kind"] == "NetworkPolicy"
    }
    assert set(policies) == {
        (ns, f"rel-sluice-{who}")
        for ns in ("analytics", "payments")
        for who in ("drivers", "executors")
    }
    drivers = policies[("analytics", "rel-sluice-drivers")]
    assert drivers["podSelector"]["matchLabels"] == {
        "sluice.dev/role": "driver",
        "app.kubernetes.io/managed-by": "sluice-operator",
    }
    assert drivers["policyTypes"] == ["Ingress"]  # egress to Kafka and Cassandra is the user's
    operator, prometheus, executors = drivers["ingress"]
    assert operator["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "sluice-system"
    }
    assert operator["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == (
        "operator"
    )
    assert [p["port"] for p in operator["ports"]] == ["metrics", "control"], (
        "the operator alone reaches a standby's control port (its promotion)"
    )
    assert prometheus["from"][0]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "prometheus"
    }
    assert [p["port"] for p in prometheus["ports"]] == ["metrics"]
    assert executors["from"] == [{"podSelector": {"matchLabels": {"sluice.dev/role": "executor"}}}]
    assert [p["port"] for p in executors["ports"]] == ["driver", "blockmanager"]
    assert all(rule.get("from") for rule in drivers["ingress"])  # no rule admits everyone


def test_without_metrics_from_only_the_operator_reads_the_metrics(render: Render) -> None:
    """An ingress rule without `from` would admit every source: none is rendered."""
    docs = render("networkPolicy.metricsFrom=null")
    drivers = one(docs, "NetworkPolicy", "rel-sluice-drivers")["spec"]
    assert len(drivers["ingress"]) == 2
    assert all(rule.get("from") for rule in drivers["ingress"])


def test_network_policies_go_to_the_served_namespaces_or_those_listed_cluster_wide(
    render: Render,
) -> None:
    """Issue 38, finding 7: with clusterWide the chart rendered no NetworkPolicy at all
    (and said nothing), leaving every driver's ports open to every pod."""

    def placed(*values: str) -> set[tuple[str, str]]:
        return {
            (d["metadata"]["namespace"], d["metadata"]["name"])
            for d in render(*values)
            if d["kind"] == "NetworkPolicy"
        }

    both = {"rel-sluice-drivers", "rel-sluice-executors"}
    assert placed() == {("sluice-system", name) for name in both}
    listed = placed("clusterWide=true", "networkPolicy.namespaces={team-a,team-b}")
    assert listed == {(ns, name) for ns in ("team-a", "team-b") for name in both}
    assert not placed("clusterWide=true")
    assert not placed("networkPolicy.enabled=false")


# -- the admission policy confining drivers' tokens -------------------------------------


def test_the_driver_pod_policy_denies_writes_in_the_served_namespaces(render: Render) -> None:
    docs = render(files=[CHART / "ci" / "namespaced-values.yaml"])
    policy = one(docs, "ValidatingAdmissionPolicy", "rel-sluice-driver-pods")["spec"]
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "rel-sluice-driver-pods")["spec"]
    assert policy["failurePolicy"] == "Fail"
    [rule] = policy["matchConstraints"]["resourceRules"]
    assert (rule["resources"], sorted(rule["operations"])) == (
        ["pods"],
        ["CREATE", "DELETE", "UPDATE"],
    )
    assert {v["reason"] for v in policy["validations"]} == {"Forbidden"}  # 403
    assert binding["policyName"] == "rel-sluice-driver-pods"
    assert binding["validationActions"] == ["Deny"]
    [served] = binding["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert served["key"] == "kubernetes.io/metadata.name"
    assert sorted(served["values"]) == ["analytics", "payments"]


def test_the_driver_pod_policy_speaks_the_operators_names() -> None:
    """The policy's CEL spells the driver's ServiceAccount, the executors' labels and
    their ServiceAccount as naming.py makes them; a rename there must reach it."""
    text = (CHART / "templates" / "driverpolicy.yaml").read_text()
    pipeline = "payments"
    driver_suffix = naming.service_account(pipeline).removeprefix(pipeline)
    executor_suffix = naming.executor_service_account(pipeline).removeprefix(pipeline)
    labels = naming.executor_labels(pipeline, 1)
    assert f'endsWith("{driver_suffix}")' in text
    assert f'size("{driver_suffix}")' in text
    assert f'variables.pipeline + "{executor_suffix}"' in text
    assert f'"{naming.LABEL_PIPELINE}"' in text
    assert labels[naming.LABEL_PIPELINE] == pipeline
    assert f'["{naming.LABEL_ROLE}"] == "{labels[naming.LABEL_ROLE]}"' in text


def test_the_driver_pod_policy_binds_everywhere_cluster_wide_and_can_be_turned_off(
    render: Render,
) -> None:
    docs = render("clusterWide=true")
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "rel-sluice-driver-pods")["spec"]
    assert "matchResources" not in binding  # every namespace
    secrets = one(docs, "ValidatingAdmissionPolicyBinding", "rel-sluice-executor-secrets")
    assert "namespaceSelector" not in secrets["spec"]["matchResources"]
    off = render("driverPodPolicy.enabled=false")
    left = {d["metadata"]["name"] for d in off if d["kind"].startswith("ValidatingAdmission")}
    assert left == {"rel-sluice-secret-consent"}  # not a driver pod policy


def test_the_secret_consent_policy_names_the_platform_and_follows_the_label(
    render: Render,
) -> None:
    """Issue 38, finding 2: a tenant could label its own Secrets usable. The policy
    (its behaviour on the real API server: test_secret_consent_policy) checks the
    label the operator asks for, lets the listed users and groups through, binds
    where the operator serves, and is gone with consent turned off."""
    docs = render(
        "operator.secretLabel=example.com/ok=yes",
        "secretConsentPolicy.platformUsers={system:serviceaccount:gitops:applier}",
    )
    policy = one(docs, "ValidatingAdmissionPolicy", "rel-sluice-secret-consent")["spec"]
    variables = {v["name"]: v["expression"] for v in policy["variables"]}
    assert variables["key"] == '"example.com/ok"'
    assert '["system:serviceaccount:gitops:applier"]' in variables["platform"]
    assert '["system:masters"]' in variables["platform"]
    assert policy["matchConstraints"]["resourceRules"][0]["resources"] == ["secrets"]
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "rel-sluice-secret-consent")
    selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
    assert selector["values"] == ["sluice-system"]
    for off in ("operator.secretLabel=", "secretConsentPolicy.enabled=false"):
        names = {d["metadata"]["name"] for d in render(off)}
        assert "rel-sluice-secret-consent" not in names


def test_the_driver_pod_policy_never_holds_the_operator_to_it(render: Render) -> None:
    """A release whose operator account ends in -driver keeps its own pod rights."""
    docs = render("fullnameOverride=team-driver")
    for name in ("team-driver-driver-pods", "team-driver-executor-secrets"):
        policy = one(docs, "ValidatingAdmissionPolicy", name)["spec"]
        [condition] = policy["matchConditions"]
        assert '!= "system:serviceaccount:sluice-system:team-driver"' in condition["expression"]


def test_executor_pods_of_a_driver_get_only_the_operators_volume_kinds_and_no_token(
    render: Render,
) -> None:
    """Volume kinds beyond the template's (sluice_api.pod.VOLUME_SOURCES, which the
    Secrets policy looks into) could name Secrets or tokens: the pod policy refuses
    them, and any token, at creation."""
    policy = one(render(), "ValidatingAdmissionPolicy", "rel-sluice-driver-pods")["spec"]
    expressions = [v["expression"] for v in policy["validations"]]
    [kinds] = [e for e in expressions if "object.spec.volumes.all(v, has(v.emptyDir)" in e]
    assert set(re.findall(r"has\(v\.(\w+)\)", kinds)) == set(VOLUME_SOURCES)
    [token] = [e for e in expressions if "automountServiceAccountToken" in e]
    assert "!object.spec.automountServiceAccountToken" in token


def test_executor_pods_name_only_the_secrets_their_pipelines_status_lists(
    render: Render,
) -> None:
    """The allowed Secrets come from the pipeline's status (which a driver cannot
    write), every StreamingPipeline of the pod's namespace being a param; only
    executor-labelled pods are matched, at creation, in the served namespaces."""
    docs = render(files=[CHART / "ci" / "namespaced-values.yaml"])
    name = "rel-sluice-executor-secrets"
    policy = one(docs, "ValidatingAdmissionPolicy", name)["spec"]
    binding = one(docs, "ValidatingAdmissionPolicyBinding", name)["spec"]
    assert policy["failurePolicy"] == "Fail"
    assert policy["paramKind"] == {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": naming.KIND,
    }
    [rule] = policy["matchConstraints"]["resourceRules"]
    assert (rule["resources"], rule["operations"]) == (["pods"], ["CREATE"])
    alias = PipelineStatus.model_fields["executor_secrets"].alias
    variables = {v["name"]: v["expression"] for v in policy["variables"]}
    assert f"params.status.{alias}" in variables["allowed"]
    [check] = policy["validations"]
    assert check["reason"] == "Forbidden"
    assert check["expression"].startswith("params.metadata.name != variables.pipeline ||")
    assert binding["policyName"] == name
    assert binding["validationActions"] == ["Deny"]
    assert binding["paramRef"] == {"selector": {}, "parameterNotFoundAction": "Deny"}
    selected = binding["matchResources"]
    assert selected["objectSelector"] == {"matchLabels": {naming.LABEL_ROLE: naming.ROLE_EXECUTOR}}
    [served] = selected["namespaceSelector"]["matchExpressions"]
    assert sorted(served["values"]) == ["analytics", "payments"]


def test_the_driver_pod_policy_holds_executor_pods_to_the_restricted_profile(
    render: Render,
) -> None:
    """Issue 38, finding 3: a driver's token created executor pods outside the
    restricted Pod Security Standard (test_hostile_tenant shows each one refused by
    the real API server); the policy spells every rule of it."""
    policy = one(render(), "ValidatingAdmissionPolicy", "rel-sluice-driver-pods")["spec"]
    rules = " ".join(v["expression"] for v in policy["validations"])
    for rule in (
        "runAsNonRoot",
        "runAsUser != 0",
        '["RuntimeDefault", "Localhost"]',
        "allowPrivilegeEscalation",
        'drop.exists(d, d == "ALL")',
        'add.all(a, a == "NET_BIND_SERVICE")',
        'procMount == "Default"',
        "hostPort",
        '"ephemeral-storage" in c.resources.limits',
        'startsWith("system-")',
        "sysctls",
        "hostAliases",
        "initContainers.all(c, has(c.securityContext)",
    ):
        assert rule in rules, rule
