"""The Helm chart against the local cluster, as an operator of the cluster uses it:
``helm template`` output passes the API server's server-side dry run; ``helm install``
starts the operator as a pod on the node agent, where it acts with nothing but its
chart-granted RBAC (the node agent hands the pod its own service-account token) and
reconciles a pipeline into a running driver; ``helm upgrade`` replaces the operator
pod without restarting the driver; ``helm uninstall`` removes the operator and its
RBAC but keeps the CRD and the pipelines.

On the node agent every pod shares the host's network, so two operator replicas
would bind the same HTTP port: the install here runs one replica (leader election
still on) and updates without a surge pod. Elapsed times are printed (pytest -s).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config
from kubernetes.client import (
    ApiextensionsV1Api,
    CoordinationV1Api,
    RbacAuthorizationV1Api,
    V1Namespace,
)
from kubernetes.client.exceptions import ApiException

from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.servers import kube, nodeagent
from sluice_operator import crd, naming
from tests.support.agents import free_port, wait_default_service_account
from tests.support.helm import CHART, operator_pods
from tests.support.helm import runner as helm_runner
from tests.support.operator import Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

OPERATOR_IMAGE = "sluice-test/operator"


def operator_root(where: Path) -> Path:
    """A code root holding what Dockerfile.operator installs, sluice_operator and
    sluice_api, from this checkout: the node agent passes no PYTHONPATH to pods, so
    with the operator's directory alone a pod would import sluice_api from wherever
    the venv was installed from (another checkout's, older)."""
    where.mkdir()
    for package in ("operator/sluice_operator", "api/sluice_api"):
        (where / Path(package).name).symlink_to(REPO_ROOT / package)
    return where


@pytest.fixture
def helm(helm_binary: Path, agent_stack: Layout, tmp_path: Path) -> Callable[..., str]:
    """Runs helm as the cluster admin, with its caches under the test's directory."""
    return helm_runner(helm_binary, agent_stack, tmp_path)


@pytest.fixture
def kubectl(agent_stack: Layout) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kube.kubectl(agent_stack)), f"--kubeconfig={agent_stack.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return run


@pytest.fixture
def api(agent_stack: Layout) -> Any:
    return config.new_client_from_config(str(agent_stack.kubeconfig))  # type: ignore[no-untyped-call]


@pytest.fixture
def watched(core: Any, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A second namespace: the one the operator watches (the release lives in another)."""
    name = unique_name("watched")[:63].rstrip("-")
    core.create_namespace(V1Namespace.model_validate({"metadata": {"name": name}}))
    yield name
    core.delete_namespace(name)


def release_name() -> str:
    return f"sl-{uuid.uuid4().hex[:6]}"


def running(core: Any, namespace: str, release: str) -> Any | None:
    pods = [p for p in operator_pods(core, namespace, release) if p.status.phase == "Running"]
    return pods[0] if len(pods) == 1 else None


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


# -- server-side dry run ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["cluster", "namespaced"])
def test_rendered_manifests_pass_a_server_side_dry_run(
    helm: Callable[..., str],
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    namespace: str,
    watched: str,
    mode: str,
) -> None:
    values = (
        [f"--set=watchNamespaces={{{watched}}}"]
        if mode == "namespaced"
        else ["--set=clusterWide=true"]
    )
    rendered = helm("template", release_name(), str(CHART), "-n", namespace, *values)
    applied = kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered)
    assert applied.returncode == 0, applied.stderr
    accepted = applied.stdout.splitlines()
    assert all(line.endswith("(server dry run)") for line in accepted), applied.stdout
    kinds = {line.split("/", 1)[0] for line in accepted}
    assert {"deployment.apps", "serviceaccount", "service"} <= kinds
    assert {"role.rbac.authorization.k8s.io", "clusterrole.rbac.authorization.k8s.io"} <= kinds


# -- a pod of the node agent acts as its service account ----------------------------------


def test_a_node_agent_pod_acts_as_its_service_account(
    agent_stack: Layout, core: Any, namespace: str, api: Any
) -> None:
    """What the operator pod relies on: the pod's own token, so RBAC applies to it."""
    rbac = RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pod-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        },
    )
    wait_default_service_account(core, namespace)
    script = (
        "import json; from kubernetes import client, config; config.load_kube_config();"
        f"api = client.CoreV1Api(); ns = {namespace!r}\n"
        "result = {'pods': len(api.list_namespaced_pod(ns).items)}\n"
        "try:\n    api.list_namespaced_secret(ns)\nexcept client.ApiException as e:\n"
        "    result['secrets'] = e.status\nprint(json.dumps(result))"
    )
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "whoami"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "any", "command": ["python", "-c", script]}],
            },
        },
    )

    def finished() -> Any:
        pod = core.read_namespaced_pod("whoami", namespace)
        return pod if pod.status.phase in ("Succeeded", "Failed") else None

    pod = wait_for(finished, timeout=60, what="the whoami pod to finish")
    assert pod.status.phase == "Succeeded", pod.status
    logs = list((nodeagent.state_dir(agent_stack) / "pods").glob(f"{namespace}_whoami_*/c/0.log"))
    assert len(logs) == 1
    assert json.loads(logs[0].read_text().strip().splitlines()[-1]) == {"pods": 1, "secrets": 403}


# -- install, reconcile, upgrade, uninstall ------------------------------------------------


def test_install_reconcile_upgrade_uninstall(
    helm: Callable[..., str],
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    agent_stack: Layout,
    standin_image: str,
    sluice_crd: str,
    core: Any,
    custom: Any,
    api: Any,
    namespace: str,
    watched: str,
    tmp_path: Path,
) -> None:
    nodeagent.register_image(agent_stack, OPERATOR_IMAGE, operator_root(tmp_path / "image"))
    release, port = release_name(), free_port()
    values = [
        f"--set=image.repository={OPERATOR_IMAGE}",
        "--set=image.tag=dev",
        "--set=replicaCount=1",
        f"--set=watchNamespaces={{{watched}}}",
        f"--set=operator.port={port}",
        "--set=strategy.rollingUpdate.maxSurge=0",
        "--set=strategy.rollingUpdate.maxUnavailable=1",
        # Pods of the local stack share the host's network; in a cluster the default
        # URL goes through the metrics Service.
        f"--set=tests.url=http://127.0.0.1:{port}/healthz",
    ]
    account = f"system:serviceaccount:{namespace}:{release}-sluice"
    # Every pod of the default install (operator, `helm test`, drivers) must pass the
    # "restricted" Pod Security Standard: the API server's own admission enforces it.
    for enforced in (namespace, watched):
        core.patch_namespace(
            enforced,
            {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
        )

    # install -------------------------------------------------------------------------
    started = time.monotonic()
    output = helm(
        "install", release, str(CHART), "-n", namespace, "--wait", "--timeout=120s", *values
    )
    pod = wait_for(
        lambda: running(core, namespace, release), timeout=120, what="operator pod Running"
    )
    print(f"\nhelm install -> operator pod Running: {time.monotonic() - started:.1f}s")
    assert "get lease sluice-operator" in output
    assert pod.spec.node_name in nodeagent.NODES
    assert pod.spec.service_account_name == f"{release}-sluice"
    _, body = wait_for(
        lambda: (lambda r: r if r[0] == 200 else None)(http_get(port, "/readyz")),
        timeout=60,
        what="the operator to lead",
        ignoring=(OSError,),
    )
    print(f"helm install -> operator leading (/readyz 200): {time.monotonic() - started:.1f}s")
    assert body == "leading\n"
    tested = helm("test", release, "-n", namespace, "--timeout=120s")
    assert "Phase:          Succeeded" in tested or "Phase: Succeeded" in tested, tested
    lease = CoordinationV1Api(api).read_namespaced_lease("sluice-operator", namespace)
    assert lease.spec.holder_identity

    # least privilege, as the API server sees the operator's identity --------------------
    def can(verb: str, resource: str, where: str) -> bool:
        done = kubectl("auth", "can-i", verb, resource, "-n", where, f"--as={account}")
        return done.stdout.strip() == "yes"

    assert can("create", "pods", watched)
    assert can("patch", "streamingpipelines.sluice.dev/status", watched)
    assert not can("create", "pods", namespace)  # not a watched namespace
    assert not can("list", "secrets", watched)
    assert not can("delete", "nodes", watched)
    # It binds the driver ClusterRole instead of holding what it grants (issue 22).
    assert can("bind", f"clusterroles.rbac.authorization.k8s.io/{release}-sluice-driver", watched)
    assert not can("bind", "clusterroles.rbac.authorization.k8s.io/admin", watched)
    assert not can("create", "roles", watched)
    assert not can("create", "configmaps", watched)
    assert not can("patch", "pods", watched)
    # The cluster id: the kube-system Namespace's UID, readable by that name only.
    assert can("get", "namespaces/kube-system", watched)
    assert not can("get", "namespaces/default", watched)

    # reconcile ---------------------------------------------------------------------------
    pipeline = Pipeline(custom, core, watched, "kpis")
    started = time.monotonic()
    pipeline.create(standin_spec())
    first = pipeline.wait_phase("Running", timeout=120)
    elapsed = time.monotonic() - started
    print(f"pipeline created -> Running under the helm-installed operator: {elapsed:.1f}s")
    assert first["epoch"] == 1
    driver = pipeline.live_pods()
    assert [p.metadata.name for p in driver] == [naming.driver_pod("kpis", 1)]
    assert driver[0].spec.service_account_name == naming.service_account("kpis")
    env = {e.name: e.value for e in driver[0].spec.containers[0].env}
    assert env["SLUICE_CLUSTER_ID"] == core.read_namespace("kube-system").metadata.uid
    scraped = http_get(port, "/metrics")[1]
    assert (
        f'sluice_operator_pipeline_phase{{phase="Running",pipeline="{watched}/kpis"}} 1.0'
        in scraped
    )

    # a driver with executors: the operator, holding only `bind`, gives it the shipped
    # ClusterRole (the API server's escalation check passes); executors get their own
    # ServiceAccount without a token
    wide = Pipeline(custom, core, watched, "wide")
    spec = standin_spec()
    spec["spark"]["executors"] = {"instances": 2}
    wide.create(spec)
    wide.wait_phase("Running", timeout=120)
    binding = RbacAuthorizationV1Api(api).read_namespaced_role_binding("wide-driver", watched)
    assert (binding.role_ref.kind, binding.role_ref.name) == (
        "ClusterRole",
        f"{release}-sluice-driver",
    )
    assert core.read_namespaced_service_account("wide-executor", watched)
    assert not driver[0].spec.automount_service_account_token  # kpis: no executors
    wide.delete()

    # upgrade -----------------------------------------------------------------------------
    old = pod.metadata.name
    started = time.monotonic()
    helm(
        "upgrade",
        release,
        str(CHART),
        "-n",
        namespace,
        "--wait",
        "--timeout=120s",
        *values,
        "--set=operator.verbose=true",
    )
    new = wait_for(
        lambda: (lambda p: p if p is not None and p.metadata.name != old else None)(
            running(core, namespace, release)
        ),
        timeout=120,
        what="the upgraded operator pod",
    )
    assert "--verbose" in new.spec.containers[0].args
    wait_for(
        lambda: http_get(port, "/readyz")[0] == 200,
        timeout=60,
        what="the new pod to lead",
        ignoring=(OSError,),
    )
    print(f"helm upgrade -> new operator pod leading: {time.monotonic() - started:.1f}s")
    wait_for(
        lambda: (
            f'sluice_operator_pipeline_phase{{phase="Running",pipeline="{watched}/kpis"}} 1.0'
            in http_get(port, "/metrics")[1]
        ),
        timeout=60,
        what="the new leader to reconcile the pipeline",
        ignoring=(OSError,),
    )
    assert pipeline.status()["epoch"] == 1, "an operator upgrade must not restart drivers"
    assert [p.metadata.name for p in pipeline.live_pods()] == [naming.driver_pod("kpis", 1)]
    # The new operator starts the next driver of a pipeline it did not start: the
    # driver's ServiceAccount and Service exist, and the operator reads them to see
    # that they are the pipeline's. The chart granted only `create` on them, so every
    # new driver after an operator restart was refused (403, each reconcile).
    core.delete_namespaced_pod(naming.driver_pod("kpis", 1), watched, grace_period_seconds=0)
    replaced = pipeline.wait_phase("Running", epoch=2, timeout=120)
    assert replaced["driverPod"] == naming.driver_pod("kpis", 2)
    history = helm("history", release, "-n", namespace, "-o", "json")
    assert [h["status"] for h in json.loads(history)] == ["superseded", "deployed"]

    # uninstall ---------------------------------------------------------------------------
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=120s")
    wait_for(
        lambda: not operator_pods(core, namespace, release), timeout=120, what="operator pods gone"
    )
    rbac = RbacAuthorizationV1Api(api)
    with pytest.raises(ApiException) as gone:
        rbac.read_cluster_role(f"{release}-sluice-cluster")
    assert gone.value.status == 404
    with pytest.raises(ApiException) as gone:
        rbac.read_namespaced_role(f"{release}-sluice", watched)
    assert gone.value.status == 404
    assert (
        ApiextensionsV1Api(api).read_custom_resource_definition(crd.NAME).metadata.name == crd.NAME
    )
    assert pipeline.get() is not None, "the pipeline survives an uninstall with its CRD"

    # the operator is gone, so its finalizer is removed by hand before the namespace goes
    pipeline.custom.patch_namespaced_custom_object(
        naming.GROUP,
        naming.VERSION,
        watched,
        naming.PLURAL,
        "kpis",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    pipeline.delete()
    wait_for(lambda: pipeline.get() is None, timeout=60, what="the pipeline deleted")
