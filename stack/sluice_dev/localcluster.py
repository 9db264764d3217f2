"""The operator's side of the local stack, as a user sets it up: the CRD, a namespace
and an operator process serving it, job images on the node agent, and what the chart
ships for drivers with executors (their ClusterRole and admission policy), rendered by
helm from the chart itself. One copy for ``make demo``, ``sluice-dev pipeline apply``, the soak,
the benchmark's executor run and the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Final

import yaml

from sluice_dev import procs, stack
from sluice_dev.imagebuild import image_env_text
from sluice_dev.kubectl import Kubectl, KubectlError
from sluice_dev.nodeagent.podspec import IMAGE_ENV_FILE
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.servers import nodeagent, tools
from sluice_dev.servers.spark import job_image_env

Say = Callable[[str], None]
CRD: Final = REPO_ROOT / "crds" / "streamingpipelines.sluice.dev.yaml"
CHART: Final = REPO_ROOT / "charts" / "sluice"
OPERATOR_START_TIMEOUT: Final = 120.0


CRD_NAME: Final = "streamingpipelines.sluice.dev"
PSA_ENFORCE: Final = "pod-security.kubernetes.io/enforce"


def install_crd(kubectl: Kubectl, *, timeout: float = 60.0, poll: float = 0.2) -> None:
    """Apply the CRD and wait until the API server serves it (``Established``). Read,
    not ``kubectl wait``: a CRD just created may show ``status.conditions: null``, on
    which ``kubectl wait`` fails instead of waiting."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    deadline = time.monotonic() + timeout
    while True:
        crd = json.loads(kubectl("get", "crd", CRD_NAME, "-o", "json"))
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"crd/{CRD_NAME} not Established within {timeout:.0f}s")
        time.sleep(poll)


def operator_for(
    layout: Layout,
    kubectl: Kubectl,
    *,
    namespace: str,
    name: str,
    port: int,
    say: Say,
    pod_security: str | None = None,
) -> None:
    """The CRD installed, ``namespace`` created (with ``pod_security``, the Pod
    Security Standard the API server enforces on its pods) and an operator process of
    the stack (``name``, health and metrics on ``port``) serving it; one already
    running is kept."""
    install_crd(kubectl)
    labels = {} if pod_security is None else {PSA_ENFORCE: pod_security}
    metadata = {"name": namespace, "labels": labels}
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
    pid = procs.read_pid(layout.pidfile(name))
    if pid is not None and procs.pid_alive(pid):
        say(f"operator already running (pid {pid}), log {layout.log(name)}")
        return
    pid = start_operator(layout, namespace=namespace, name=name, port=port)
    say(f"operator pid {pid}, /metrics on 127.0.0.1:{port}, log {layout.log(name)}")


def start_operator(layout: Layout, *, namespace: str, name: str, port: int) -> int:
    """``python -m sluice_operator`` serving ``namespace``, a process of the stack named
    ``name``; returns its pid once its ``/healthz`` on ``port`` answers."""
    argv = [
        sys.executable,
        "-m",
        "sluice_operator",
        f"--namespace={namespace}",
        f"--lease-namespace={namespace}",
        "--http-host=127.0.0.1",
        f"--http-port={port}",
        "--no-leader-election",
    ]
    env = {**os.environ, "KUBECONFIG": str(layout.kubeconfig), **procs.marker_env(layout.stack)}
    pid = procs.spawn(
        argv, log=layout.log(name), pidfile=layout.pidfile(name), env=env, cwd=REPO_ROOT
    )
    deadline = time.monotonic() + OPERATOR_START_TIMEOUT
    while not http_ok(f"http://127.0.0.1:{port}/healthz"):
        if not procs.pid_alive(pid):
            raise stack.StackError(f"the operator exited; log {layout.log(name)}")
        if time.monotonic() > deadline:
            raise stack.StackError(f"the operator's /healthz on port {port}: no answer")
        time.sleep(0.3)
    return pid


def register_job_images(layout: Layout, image: str, versions: Sequence[str]) -> list[str]:
    """``image:version`` for each version on the node agent, as the job image: no code
    of its own (the driver's is installed) and Spark's Kafka jars where its
    ``image.env`` says. Returns the image references."""
    text = image_env_text(job_image_env(layout))
    references = []
    for version in versions:
        root = layout.stack / "images" / image.replace("/", "_") / version
        root.mkdir(parents=True, exist_ok=True)
        (root / IMAGE_ENV_FILE).write_text(text)
        nodeagent.register_image(layout, f"{image}:{version}", root)
        references.append(f"{image}:{version}")
    return references


RELEASE: Final = "sluice"
DRIVER_POD_POLICY: Final = f"{RELEASE}-driver-pods"
"""The chart's ValidatingAdmissionPolicy confining a driver's token to its own
executor pods, as ``helm install sluice`` names it."""
EXECUTOR_SECRETS_POLICY: Final = f"{RELEASE}-executor-secrets"
"""The chart's ValidatingAdmissionPolicy confining the Secrets a driver's executor pods
name to those its pipeline's ``status.executorSecrets`` lists."""
POLICY_KINDS: Final = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
PROBE_USER: Final = "system:serviceaccount:default:probe-driver"
"""A driver-like account the policy matches; impersonated with ``system:masters`` so
that RBAC lets the request through to admission."""
POLICY_TIMEOUT: Final = 60.0


def render_chart(
    layout: Layout, *values: str, namespace: str | None = None
) -> list[dict[str, Any]]:
    """``helm template sluice charts/sluice`` with ``--set`` ``values`` (released in
    ``namespace``, or helm's default), by the provisioned helm (never a copy of the
    chart)."""
    stack.provision(layout, [tools.HELM.name], say=lambda _line: None)
    argv = [str(tools.helm(layout)), "template", RELEASE, str(CHART)]
    argv += [] if namespace is None else [f"--namespace={namespace}"]
    argv += [f"--set={value}" for value in values]
    rendered = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def apply_driver_rights(layout: Layout, kubectl: Kubectl, cluster_role: str) -> None:
    """What the chart ships for drivers that run executor pods, as ``helm install``
    creates it, applied as the stack's admin: the ClusterRole ``cluster_role`` they are
    bound to, and the admission policies confining them to their own executor pods
    and those pods to the Secrets their pipeline lists,
    bound in every namespace (``clusterWide``: the tests make a namespace each) and
    waited for until the API server enforces them. The CRD must be installed first
    (``install_crd``): the second policy's params are StreamingPipelines."""
    for doc in render_chart(layout, "clusterWide=true"):
        is_role = doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == cluster_role
        if is_role or doc["kind"] in POLICY_KINDS:
            kubectl.apply(doc)
    kubectl.apply(_PROBE_EXECUTOR_ACCOUNT)  # else the ServiceAccount admission refuses first
    for policy, probe in ((DRIVER_POD_POLICY, _NO_EXECUTOR), (EXECUTOR_SECRETS_POLICY, _EXECUTOR)):
        deadline = time.monotonic() + POLICY_TIMEOUT
        while not _refuses_probe(kubectl, policy, probe):
            if time.monotonic() > deadline:
                raise stack.StackError(f"{policy} not in force after {POLICY_TIMEOUT}s")
            time.sleep(0.5)


_NO_EXECUTOR: Final = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "policy-probe", "namespace": "default"},
    "spec": {"containers": [{"name": "probe", "image": "probe"}]},
}
"""A pod that is no executor: the driver pod policy refuses it from a driver."""
_EXECUTOR: Final = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "policy-probe-exec-1",
        "namespace": "default",
        "labels": {"sluice.dev/pipeline": "probe", "sluice.dev/role": "executor"},
    },
    "spec": {
        "serviceAccountName": "probe-executor",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "probe",
                "image": "probe",
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
                "resources": {"limits": {"ephemeral-storage": "1Gi"}},
            }
        ],
        "volumes": [{"name": "s", "secret": {"secretName": "probe"}}],
    },
}
"""An executor pod of pipeline "probe" naming a Secret, in a namespace without
pipelines: the executor Secrets policy refuses it (it finds no pipeline there); the
driver pods policy lets it through (restricted, as the operator's template is), so
the refusal can only be the Secrets policy's."""


_PROBE_EXECUTOR_ACCOUNT: Final = {
    "apiVersion": "v1",
    "kind": "ServiceAccount",
    "metadata": {"name": "probe-executor", "namespace": "default"},
    "automountServiceAccountToken": False,
}


def _refuses_probe(kubectl: Kubectl, policy: str, pod: dict[str, Any]) -> bool:
    """A server-side dry run (admission runs, nothing is stored) of ``pod``, created by
    a driver-like account: refused by ``policy`` once in force."""
    try:
        kubectl(
            f"--as={PROBE_USER}",
            "--as-group=system:masters",
            "create",
            "--dry-run=server",
            "-f",
            "-",
            stdin=json.dumps(pod),
        )
    except KubectlError as err:
        return policy in str(err)
    return False


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False
