"""The local Kubernetes control plane behaves like a real one where Sluice relies on it:
CRDs with structural schemas are served and enforced (bad manifests are rejected with
the field named), kubectl talks to it, the node agent's identity may do what a kubelet
does and no more, and the controller-manager marks a node whose Lease stops being
renewed unreachable within seconds.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sluice_dev import versions
from sluice_dev.paths import Layout
from sluice_dev.servers import kube

pytestmark = pytest.mark.integration

GROUP = "test.sluice.dev"
PLURAL = "widgets"
CRD_NAME = f"{PLURAL}.{GROUP}"
UNREACHABLE = "node.kubernetes.io/unreachable"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
ZONE = "topology.kubernetes.io/zone"


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class ApiError(Exception):
    """A non-2xx answer of the API server; ``status`` is its Status object."""

    def __init__(self, code: int, status: dict[str, Any]) -> None:
        super().__init__(f"{code}: {status.get('message', status)}")
        self.code = code
        self.status = status


class Api:
    """A minimal JSON client of the local API server, acting as one identity."""

    def __init__(self, layout: Layout, identity: str) -> None:
        self.layout, self.identity = layout, identity

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, patch: bool = False
    ) -> dict[str, Any]:
        content_type = "application/merge-patch+json" if patch else "application/json"
        code, raw = kube.api_request(
            self.layout, method, path, body, identity=self.identity, content_type=content_type
        )
        decoded: dict[str, Any] = json.loads(raw) if raw else {}
        if code >= 300:
            raise ApiError(code, decoded)
        return decoded

    def get(self, path: str) -> dict[str, Any]:
        return self.call("GET", path)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except ApiError as err:
            if err.code == 404:
                return False
            raise
        return True


@pytest.fixture(scope="module")
def admin(kube_stack: Layout) -> Api:
    return Api(kube_stack, "admin")


@pytest.fixture(scope="module")
def node_agent(kube_stack: Layout) -> Api:
    return Api(kube_stack, "node-agent")


@pytest.fixture
def namespace(admin: Api) -> Iterator[str]:
    name = f"test-kube-{uuid.uuid4().hex[:8]}"
    admin.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    admin.call("DELETE", f"/api/v1/namespaces/{name}")


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size", "color"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1},
                                    "color": {"type": "string", "enum": ["red", "green"]},
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture(scope="module")
def widget_crd(admin: Api) -> Iterator[str]:
    """The test CRD, established; removed afterwards (also a leftover of a crashed run)."""
    path = f"{CRDS}/{CRD_NAME}"
    if admin.exists(path):
        admin.call("DELETE", path)
        wait_for("the leftover test CRD to go", lambda: not admin.exists(path), timeout=60)
    admin.call("POST", CRDS, CRD)

    def established() -> bool:
        # A CRD just created may show ``status.conditions: null`` until its controller
        # has looked at it.
        conditions = (admin.get(path).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for("the test CRD to be established", established, timeout=30)
    yield CRD_NAME
    admin.call("DELETE", path)
    wait_for("the test CRD to be deleted", lambda: not admin.exists(path), timeout=60)


def widgets(namespace: str) -> str:
    return f"/apis/{GROUP}/v1/namespaces/{namespace}/{PLURAL}"


def wait_until_served(admin: Api, namespace: str) -> None:
    """Serving a new CRD's resource lags its Established condition briefly: first 404,
    then 429 "storage is (re)initializing" until its watch cache is ready."""

    def served() -> bool:
        try:
            admin.get(widgets(namespace))
        except ApiError as err:
            if err.code in (404, 429):
                return False
            raise
        return True

    wait_for("the Widget resource to be served", served, timeout=30)


def widget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_custom_resource_is_created_and_read_back(
    admin: Api, widget_crd: str, namespace: str
) -> None:
    wait_until_served(admin, namespace)
    created = admin.call("POST", widgets(namespace), widget("w1", {"size": 3, "color": "red"}))
    assert created["metadata"]["uid"]

    read = admin.get(f"{widgets(namespace)}/w1")
    assert read["spec"] == {"size": 3, "color": "red"}
    assert read["metadata"]["uid"] == created["metadata"]["uid"]


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        pytest.param({"size": "big", "color": "red"}, "spec.size", "Invalid value", id="type"),
        pytest.param({"size": 2}, "spec.color", "Required value", id="required"),
        pytest.param({"size": 2, "color": "blue"}, "spec.color", "Unsupported value", id="enum"),
        pytest.param({"size": 0, "color": "red"}, "spec.size", "greater than or equal", id="min"),
    ],
)
def test_invalid_custom_resource_is_rejected_naming_the_field(
    admin: Api,
    widget_crd: str,
    namespace: str,
    spec: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    wait_until_served(admin, namespace)
    with pytest.raises(ApiError) as raised:
        admin.call("POST", widgets(namespace), widget("bad", spec))

    assert raised.value.code == 422
    status = raised.value.status
    assert status["reason"] == "Invalid"
    assert field in status["message"], status["message"]
    assert reason in status["message"], status["message"]
    assert field in {cause.get("field") for cause in status["details"]["causes"]}
    assert not admin.exists(f"{widgets(namespace)}/bad")


def test_kubectl_reaches_the_apiserver(kube_stack: Layout) -> None:
    kubectl = [str(kube.kubectl(kube_stack)), f"--kubeconfig={kube_stack.kubeconfig}"]

    readyz = subprocess.run(
        [*kubectl, "get", "--raw", "/readyz"], capture_output=True, text=True, timeout=30
    )
    assert readyz.returncode == 0, readyz.stderr
    assert readyz.stdout.strip() == "ok"

    version = subprocess.run(
        [*kubectl, "version", "-o", "json"], capture_output=True, text=True, timeout=30
    )
    assert version.returncode == 0, version.stderr
    reported = json.loads(version.stdout)
    assert reported["serverVersion"]["gitVersion"] == f"v{versions.KUBERNETES}"
    assert reported["clientVersion"]["gitVersion"] == f"v{versions.KUBERNETES}"


# --- the node agent's identity and the node lifecycle --------------------------------


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def register_node(api: Api, name: str, zone: str | None = None) -> None:
    """What the node agent does for each node it plays: the Node, Ready, a Lease; in
    ``zone`` (topology.kubernetes.io/zone) if given."""
    labels = {"sluice.dev/test": "kube"} | ({ZONE: zone} if zone else {})
    node = api.call("POST", "/api/v1/nodes", {"metadata": {"name": name, "labels": labels}})
    now = _now()
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "test node",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    api.call(
        "PATCH", f"/api/v1/nodes/{name}/status", {"status": {"conditions": [ready]}}, patch=True
    )
    owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
    api.call(
        "POST",
        LEASES,
        {
            "metadata": {"name": name, "ownerReferences": [owner]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now},
        },
    )


def renew_lease(api: Api, name: str) -> None:
    api.call("PATCH", f"{LEASES}/{name}", {"spec": {"renewTime": _now()}}, patch=True)


@pytest.fixture
def node_names(admin: Api) -> Iterator[list[str]]:
    """Names for test nodes; the nodes (and their leases, via owner references) are
    deleted afterwards by the admin: the node agent's role may not delete nodes."""
    names: list[str] = []
    yield names
    for name in names:
        try:
            admin.call("DELETE", f"/api/v1/nodes/{name}")
        except ApiError as err:
            if err.code != 404:
                raise


def test_node_agent_may_act_as_a_kubelet_and_no_more(
    node_agent: Api, node_names: list[str]
) -> None:
    name = f"test-agent-{uuid.uuid4().hex[:6]}"
    node_names.append(name)
    register_node(node_agent, name)
    renew_lease(node_agent, name)

    with pytest.raises(ApiError) as raised:
        node_agent.call("POST", "/api/v1/namespaces", {"metadata": {"name": f"x-{name}"}})
    assert raised.value.code == 403
    with pytest.raises(ApiError) as raised:
        node_agent.call("DELETE", f"/api/v1/nodes/{name}")
    assert raised.value.code == 403


def _taint_effects(api: Api, name: str) -> set[str]:
    taints = api.get(f"/api/v1/nodes/{name}")["spec"].get("taints", [])
    return {t["effect"] for t in taints if t["key"] == UNREACHABLE}


def _node_summary(api: Api) -> str:
    """Every node's Ready status, zone and taints: what the controller-manager decides on."""
    lines = []
    for node in api.get("/api/v1/nodes")["items"]:
        ready = next(
            (c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"),
            "missing",
        )
        zone = node["metadata"].get("labels", {}).get(ZONE, "")
        taints = [t["key"] for t in node["spec"].get("taints", [])]
        lines.append(f"{node['metadata']['name']} Ready={ready} zone={zone!r} taints={taints}")
    return "; ".join(lines)


def _controller_log(layout: Layout, *names: str) -> str:
    """The node lifecycle controller's lines about these nodes or any zone."""
    log = layout.log("kube-controller-manager")
    wanted = (*names, "zone")
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(line for line in lines if any(w in line for w in wanted))[-4000:]


def _ready_status(api: Api, name: str) -> str:
    conditions = api.get(f"/api/v1/nodes/{name}")["status"].get("conditions", [])
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "missing")


def test_node_whose_lease_stops_is_tainted_unreachable(
    admin: Api, node_agent: Api, node_names: list[str], agent_stack: Layout
) -> None:
    # Two nodes: the controller-manager stops tainting when *every* node of a zone is
    # down (it suspects its own connectivity then), so one node keeps heartbeating.
    # Both are in a zone of their own: the controller-manager rates, and suspends,
    # tainting per zone, so whatever state other tests left the stack's nodes in (a
    # CI run once saw the lost node untainted after 40 s) does not reach this zone.
    tag = uuid.uuid4().hex[:6]
    alive, lost = (f"test-{role}-{tag}" for role in ("alive", "lost"))
    node_names.extend([alive, lost])
    register_node(node_agent, alive, zone=f"test-{tag}")
    register_node(node_agent, lost, zone=f"test-{tag}")
    last_lost_renewal = time.monotonic()

    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(1.0):
            renew_lease(node_agent, alive)

    beating = threading.Thread(target=heartbeat, daemon=True)
    beating.start()
    try:
        grace = float(kube.NODE_MONITOR_GRACE.removesuffix("s"))
        try:
            wait_for(
                "the lost node to be tainted unreachable (NoExecute)",
                lambda: "NoExecute" in _taint_effects(admin, lost),
                timeout=grace + 50,
            )
        except pytest.fail.Exception as failed:
            raise AssertionError(
                f"{failed}\nthe nodes: {_node_summary(admin)}\n"
                f"the controller-manager on them:\n{_controller_log(agent_stack, lost, alive)}"
            ) from None
        took = time.monotonic() - last_lost_renewal
        assert _ready_status(admin, lost) == "Unknown"
        assert took >= grace - 1  # not before the grace period
        assert _taint_effects(admin, alive) == set()
        assert _ready_status(admin, alive) == "True"
    finally:
        stop.set()
        beating.join(timeout=10)
