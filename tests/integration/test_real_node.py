"""Real nodes: the pinned kubelet with containerd and runc runs the job image built
from Dockerfile.job, in containers, as the chart and the operator run it.

Two workers (``sluice-worker-1`` and ``-2``), each a kubelet and a containerd in a
network namespace of its own, behind the stack's own namespace (see
``sluice_dev.netns`` and ``sluice_dev.realnode``). What the node agent could not
show, shown here: the restricted pod's read-only root filesystem as uid 185, a
ConfigMap volume and a Secret through ``envFrom``, ``kubectl logs``, the API server
through the ``kubernetes`` Service (kube-proxy's rules), Services by name through
the cluster DNS, pod addresses
that pods of the other worker and the stack's own processes reach, a memory limit
enforced by the kernel (OOMKilled), a force delete that kills a process ignoring
SIGTERM, and a stopped kubelet whose node goes NotReady while its pod runs on.

Runs with ``SLUICE_NETNS=1`` (``make test-node``): the session then lives in the
stack's namespace. ``make test`` leaves it out until the suites move to real nodes.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import DiscoveryV1Api

from sluice_dev import ports, procs, stack
from sluice_dev.kubectl import Kubectl
from sluice_dev.oci import bases
from sluice_dev.oci import images as oci_images
from sluice_dev.oci.podman import Podman
from sluice_dev.paths import Layout
from sluice_dev.realnode import images as node_images
from sluice_dev.realnode import plan, runtime
from sluice_dev.realnode.servers import kubelet_name
from sluice_dev.servers import kube
from tests.support.fixtures import REAL_JOB_IMAGE as JOB_IMAGE
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.timeout(900)]

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 185,
    "seccompProfile": {"type": "RuntimeDefault"},
}


@pytest.fixture
def workers(real_workers: tuple[plan.Worker, ...]) -> tuple[plan.Worker, ...]:
    return real_workers


@pytest.fixture
def restricted(kube_stack: Layout, namespace: str) -> str:
    """The test's namespace, where Pod Security admission enforces ``restricted``."""
    Kubectl(kube_stack)(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )
    return namespace


def _pod(name: str, node: str, script: str, **extra: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": JOB_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["python", "-c", script],
        "securityContext": RESTRICTED,
        **extra.pop("container", {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "dnsPolicy": "Default",
            "securityContext": POD_SECURITY,
            "containers": [container],
            **extra,
        },
    }


def _apply(layout: Layout, namespace: str, body: dict[str, Any]) -> None:
    Kubectl(layout)("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def _pod_status(core: Any, namespace: str, name: str) -> Any:
    return core.read_namespaced_pod(name, namespace).status


def _completed(layout: Layout, core: Any, namespace: str, pod: dict[str, Any]) -> Any:
    """Run ``pod`` to its end; the JSON of its log's last line, once it succeeded."""
    name = pod["metadata"]["name"]
    _apply(layout, namespace, pod)
    status = _wait_phase(core, namespace, name, {"Succeeded", "Failed"}, timeout=180)
    log = core.read_namespaced_pod_log(name, namespace)
    assert status.phase == "Succeeded", log
    return json.loads(log.strip().splitlines()[-1])


def _wait_phase(core: Any, namespace: str, name: str, phases: set[str], timeout: float) -> Any:
    return wait_for(
        lambda: (s := _pod_status(core, namespace, name)).phase in phases and s,
        timeout=timeout,
        what=f"pod {name} in {sorted(phases)}",
        interval=0.5,
    )


def test_two_workers_are_ready_with_the_pinned_kubelet_and_containerd(
    workers: tuple[plan.Worker, ...], core: Any
) -> None:
    for node in workers:
        info = core.read_node(node.name)
        ready = [c.status for c in info.status.conditions if c.type == "Ready"]
        assert ready == ["True"], node.name
        assert info.status.node_info.kubelet_version == "v1.34.4"
        assert info.status.node_info.container_runtime_version.startswith("containerd://")
        internal = [a.address for a in info.status.addresses if a.type == "InternalIP"]
        assert internal == [node.address]
        # Driver pods ask for ephemeral storage (their scratch emptyDir): a node that
        # reports none can run none of them.
        assert int(info.status.allocatable["ephemeral-storage"]) > 2**30


def test_a_rebuilt_image_under_the_same_name_replaces_the_workers_copy(
    kube_stack: Layout, workers: tuple[plan.Worker, ...]
) -> None:
    """A moving tag (``localhost/sluice/job:dev``) rebuilt with new code is given to
    the workers again. Found by a rebuilt operator image: the workers kept the old one
    under the same name (the load looked at names only), so pods ran the old code."""
    podman = Podman.for_layout(kube_stack)
    name = "localhost/sluice-test/moving:dev"
    worker = workers[0]
    for source in (bases.PYTHON.image, oci_images.OPERATOR.dev):  # two builds, one name
        podman.tag(source, name)
        archive = node_images.archive(kube_stack, name)
        node_images.load(kube_stack, worker, name)
        assert runtime.images(worker)[name] == runtime.archived(archive)[1], source


CHECKS = """
import errno, json, os, socket, pyspark
try:
    open("/opt/written", "w")
    root = "writable"
except OSError as err:
    root = errno.errorcode[err.errno]
with open("/etc/orders/tiers.json") as f:
    tiers = json.load(f)
apiserver = socket.create_connection((os.environ["API_HOST"], int(os.environ["API_PORT"])), 5)
apiserver.close()
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "root": root, "tiers": tiers,
    "secret": os.environ.get("ORDERS_TOKEN"), "pyspark": pyspark.__version__,
    "home": os.environ.get("HOME"), "ip": os.environ["POD_IP"],
}))
"""


def test_a_restricted_pod_of_the_job_image_runs_with_its_volume_and_secret(
    workers: tuple[plan.Worker, ...], kube_stack: Layout, core: Any, restricted: str
) -> None:
    kubectl = Kubectl(kube_stack)
    kubectl(
        "create", "configmap", "orders-tiers", "-n", restricted,
        '--from-literal=tiers.json={"gold": 3}',
    )  # fmt: skip
    kubectl(
        "create",
        "secret",
        "generic",
        "orders",
        "-n",
        restricted,
        "--from-literal=ORDERS_TOKEN=s3cr3t",
    )
    pod = _pod(
        "checks",
        workers[0].name,
        CHECKS,
        container={
            "envFrom": [{"secretRef": {"name": "orders"}}],
            "env": [
                {"name": "API_HOST", "value": ports.HOST},
                {"name": "API_PORT", "value": str(ports.KUBE_APISERVER)},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ],
            "volumeMounts": [{"name": "tiers", "mountPath": "/etc/orders", "readOnly": True}],
        },
        volumes=[{"name": "tiers", "configMap": {"name": "orders-tiers"}}],
    )
    _apply(kube_stack, restricted, pod)
    status = _wait_phase(core, restricted, "checks", {"Succeeded", "Failed"}, timeout=180)
    log = core.read_namespaced_pod_log("checks", restricted)
    assert status.phase == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    assert seen["uid"] == 185
    assert seen["root"] == "EROFS"
    assert seen["tiers"] == {"gold": 3}
    assert seen["secret"] == "s3cr3t"
    assert seen["pyspark"] == "4.2.0"
    assert seen["ip"] == status.pod_ip
    assert status.pod_ip.startswith("10.251.1.")


VERSION = """
import json, os, ssl, urllib.request
account = "/var/run/secrets/kubernetes.io/serviceaccount"
context = ssl.create_default_context(cafile=f"{account}/ca.crt")
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
request = urllib.request.Request(f"https://{host}:{port}/version")
request.add_header("Authorization", "Bearer " + open(f"{account}/token").read())
print(json.dumps({"host": host, **json.load(urllib.request.urlopen(request, context=context))}))
"""


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(
    workers: tuple[plan.Worker, ...], kube_stack: Layout, core: Any, restricted: str
) -> None:
    pod = _pod("version", workers[1].name, VERSION, automountServiceAccountToken=True)
    seen = _completed(kube_stack, core, restricted, pod)
    assert seen["host"] == kube.SERVICE_IP
    assert seen["gitVersion"] == "v1.34.4"


SERVE = """
import http.server, os
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ["POD_NAME"].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", 8090), Handler).serve_forever()
"""

FETCH = """
import os, urllib.request
print(urllib.request.urlopen(f"http://{os.environ['TARGET']}:8090/", timeout=10).read().decode())
"""


def test_pods_on_two_workers_reach_each_other_and_the_stack_reaches_them(
    workers: tuple[plan.Worker, ...], kube_stack: Layout, core: Any, restricted: str
) -> None:
    name_env = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    _apply(
        kube_stack,
        restricted,
        _pod("server", workers[0].name, SERVE, container={"env": [name_env]}),
    )
    server = _wait_phase(core, restricted, "server", {"Running"}, timeout=180)

    def answer() -> str | None:
        url = f"http://{server.pod_ip}:8090/"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    assert (
        wait_for(answer, timeout=60, what="the server pod, from the stack", ignoring=(OSError,))
        == "server"
    )

    target = {"name": "TARGET", "value": server.pod_ip}
    _apply(
        kube_stack, restricted, _pod("client", workers[1].name, FETCH, container={"env": [target]})
    )
    client = _wait_phase(core, restricted, "client", {"Succeeded", "Failed"}, timeout=180)
    log = core.read_namespaced_pod_log("client", restricted)
    assert client.phase == "Succeeded", log
    assert log.strip() == "server"
    assert client.pod_ip.startswith("10.251.2.")


RESOLVE = """
import json, socket, urllib.request
print(json.dumps({
    "kubernetes": socket.gethostbyname("kubernetes.default"),
    "web": socket.gethostbyname("web"),
    "answer": urllib.request.urlopen("http://web/", timeout=10).read().decode(),
    "resolv": open("/etc/resolv.conf").read(),
}))
"""


def test_pods_resolve_services_by_name_through_the_cluster_dns(
    workers: tuple[plan.Worker, ...], kube_stack: Layout, core: Any, restricted: str
) -> None:
    """A pod of the default ``dnsPolicy`` (``ClusterFirst``, the operator's) gets the
    cluster DNS, which answers for the ``kubernetes`` Service and for a Service of
    the test's (its ClusterIP, whose EndpointSlice the controller-manager keeps), and
    kube-proxy takes a request for that name to the pod behind it."""
    name_env = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    server = _pod("web-0", workers[0].name, SERVE, container={"env": [name_env]})
    server["metadata"]["labels"] = {"app": "web"}
    _apply(kube_stack, restricted, server)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8090}]},
    }
    _apply(kube_stack, restricted, service)
    _wait_phase(core, restricted, "web-0", {"Running"}, timeout=180)
    cluster_ip = core.read_namespaced_service("web", restricted).spec.cluster_ip
    # Running is not yet routed: until the Service's EndpointSlice holds a ready
    # address, kube-proxy rejects its ClusterIP (a client then got "Network is
    # unreachable" in one make test-node run).
    discovery = DiscoveryV1Api(core.api_client)

    def ready_endpoint() -> bool:
        slices = discovery.list_namespaced_endpoint_slice(
            restricted, label_selector="kubernetes.io/service-name=web"
        ).items
        return any(e.conditions.ready for s in slices for e in s.endpoints or [])

    wait_for(ready_endpoint, timeout=120, what="a ready endpoint of Service web")

    client = _pod("resolver", workers[1].name, RESOLVE, dnsPolicy="ClusterFirst")
    seen = _completed(kube_stack, core, restricted, client)
    assert seen["kubernetes"] == kube.SERVICE_IP
    assert seen["web"] == cluster_ip
    assert seen["answer"] == "web-0"
    assert f"search {restricted}.svc.cluster.local svc.cluster.local" in seen["resolv"]
    events = core.list_namespaced_event(restricted).items
    assert not [e.message for e in events if e.reason == "MissingClusterDNS"]


HOG = """
chunks = []
while True:
    chunks.append(bytearray(16 * 2**20))
"""


def test_a_container_over_its_memory_limit_is_oom_killed(
    workers: tuple[plan.Worker, ...], kube_stack: Layout, core: Any, restricted: str
) -> None:
    limits = {"resources": {"limits": {"memory": "128Mi", "cpu": "500m"}}}
    _apply(kube_stack, restricted, _pod("hog", workers[1].name, HOG, container=limits))
    status = _wait_phase(core, restricted, "hog", {"Failed", "Succeeded"}, timeout=180)
    terminated = status.container_statuses[0].state.terminated
    assert status.phase == "Failed"
    assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)


def _running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_force_delete_kills_a_process_that_ignores_sigterm(
    workers: tuple[plan.Worker, ...], kube_stack: Layout, core: Any, restricted: str
) -> None:
    marker = f"stubborn-{os.getpid()}-{time.monotonic_ns()}"
    script = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"time.sleep(3600)  # {marker}"
    )
    pod = _pod("stubborn", workers[0].name, script, terminationGracePeriodSeconds=600)
    _apply(kube_stack, restricted, pod)
    _wait_phase(core, restricted, "stubborn", {"Running"}, timeout=180)
    assert wait_for(lambda: _running(marker), timeout=30, what="the stubborn process")
    began = time.monotonic()
    Kubectl(kube_stack)(
        "delete", "pod", "stubborn", "-n", restricted, "--grace-period=0", "--force"
    )
    wait_for(lambda: not _running(marker), timeout=60, what="the stubborn process killed")
    print(f"\nforce delete -> process gone: {time.monotonic() - began:.1f}s (grace was 600 s)")


def test_a_stopped_kubelet_leaves_its_node_not_ready_and_its_pod_running(
    workers: tuple[plan.Worker, ...], kube_stack: Layout, core: Any, restricted: str
) -> None:
    node = workers[1]
    marker = f"zombie-{os.getpid()}-{time.monotonic_ns()}"
    _apply(
        kube_stack,
        restricted,
        _pod("zombie", node.name, f"import time\ntime.sleep(3600)  # {marker}"),
    )
    _wait_phase(core, restricted, "zombie", {"Running"}, timeout=180)
    stack.stop(kube_stack, kubelet_name(node.index))
    try:
        wait_for(
            lambda: kube.node_problem(kube_stack, node.name),
            timeout=60,
            what=f"{node.name} NotReady",
        )
        assert _running(marker), "the pod's process outlives its kubelet"
    finally:
        stack.up(kube_stack, [kubelet_name(node.index)])
    assert kube.node_problem(kube_stack, node.name) is None
    assert procs.read_pid(kube_stack.pidfile(kubelet_name(node.index)))
