"""The Kubernetes control plane of the local stack: kube-apiserver,
kube-controller-manager and kube-scheduler, built from the Kubernetes Go modules.

There is no kubelet (the project's node agent plays it), but everything else is the
real thing, so the operator meets real admission (schema validation, PodSecurity),
real RBAC, garbage collection and node-lifecycle taints. The apiserver runs with the
flags envtest uses plus what the other components need; every client authenticates
with a client certificate from :mod:`sluice_dev.pki`.

Identities (certificate CN = user, O = groups):

* ``sluice:admin`` in ``system:masters``: the admin kubeconfig ``layout.kubeconfig``.
* ``system:kube-controller-manager`` and ``system:kube-scheduler``: the users the
  built-in RBAC bootstrap policy already binds to their roles.
* ``sluice:node-agent`` in group ``sluice:node-agents``: the node agent, which plays
  the kubelet of *several* nodes with one identity. The Node authorizer and the
  NodeRestriction admission plugin tie a kubelet identity to a single node name, so
  neither is enabled; instead the ClusterRoleBinding ``sluice:node-agent`` grants the
  group the built-in ClusterRole ``system:node`` (a kubelet's rights: register and
  patch nodes and their status, leases, pods read/create/delete, pods/status,
  events, secrets/configmaps read, serviceaccounts/token). An RBAC binding cannot be
  created before the apiserver runs, so the apiserver's probe creates it: the
  apiserver counts as ready only once the binding exists. Without the Node
  authorizer ``system:node`` reads secrets and configmaps of every namespace.

Node lifecycle (see the ``NODE_*`` constants): a node whose Lease is not renewed for
the grace period becomes Ready=Unknown and gets the ``node.kubernetes.io/unreachable``
taints (NoSchedule and NoExecute) about 10.5 s after its last renewal. When *every*
node is down the controller assumes its own connectivity failed ("full disruption")
and applies only the NoSchedule taint. Processes run by the node agent reach the
apiserver at ``https://127.0.0.1:16443`` (plus ``SLUICE_PORT_OFFSET``; the serving
certificate names 127.0.0.1), not at the service IP, which nothing routes here.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from sluice_dev import netns, pki, ports, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, GoBuild, go_artifact
from sluice_dev.paths import Layout
from sluice_dev.probes import http_ok
from sluice_dev.servers import etcd
from sluice_dev.servers.base import Server
from sluice_dev.servers.tools import stamp_flags

NAME = "kubernetes"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
MODULE = STACK_SRC / "go" / "kubernetes"
COMMANDS = (APISERVER, CONTROLLER_MANAGER, SCHEDULER, "kubectl")

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"  # the first address of SERVICE_CIDR: the `kubernetes` Service
CLUSTER_NAME = "sluice"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
APISERVER_URL = f"https://{ports.HOST}:{ports.KUBE_APISERVER}"

ADMIN_USER = "sluice:admin"
NODE_AGENT_USER = "sluice:node-agent"
NODE_AGENT_GROUP = "sluice:node-agents"
NODE_AGENT_CLUSTER_ROLE = "system:node"
NODE_AGENT_BINDING = "sluice:node-agent"

# Node lifecycle, tuned for tests: the controller looks at every node each second and
# marks one NotReady/unreachable once its Lease (or status) has not been renewed for
# NODE_MONITOR_GRACE. The node agent should renew well within that (every 2 s).
NODE_MONITOR_PERIOD = "1s"
NODE_MONITOR_GRACE = "10s"
NODE_STARTUP_GRACE = "20s"
ENDPOINT_CONTROLLERS = (
    "endpoints-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
)
"""The controller-manager's controllers left off (see ``_controller_manager_argv``)."""


def version_stamps() -> dict[str, str]:
    # The same stamps as hack/lib/version.sh, so that /version, `kubectl version` and
    # Helm's kubeVersion checks see the real release instead of v0.0.0-master.
    major, minor, _patch = versions.KUBERNETES.split(".")
    stamps: dict[str, str] = {}
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamps |= {
            f"{package}.gitVersion": f"v{versions.KUBERNETES}",
            f"{package}.gitMajor": major,
            f"{package}.gitMinor": minor,
            f"{package}.gitTreeState": "clean",
        }
    return stamps


BUILD = GoBuild(
    MODULE,
    tuple(f"k8s.io/kubernetes/cmd/{cmd}" for cmd in COMMANDS),
    ldflags=tuple(stamp_flags(version_stamps())),
)
ARTIFACT = go_artifact(NAME, versions.KUBERNETES, BUILD)
ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)


def binary(layout: Layout, command: str) -> Path:
    return ARTIFACT.path(layout) / "bin" / command


def kubectl(layout: Layout) -> Path:
    """The kubectl built with the control plane (use with ``--kubeconfig``)."""
    return binary(layout, "kubectl")


def conf_dir(layout: Layout) -> Path:
    return layout.conf("kube")


def audit_log(layout: Layout) -> Path:
    """The API server's audit log: one JSON line per request (``sluice_dev.audit``)."""
    return layout.log("kube-apiserver-audit")


def _audit_policy(layout: Layout) -> Path:
    return conf_dir(layout) / "audit-policy.yaml"


# Every request at the Metadata level (who, what, which object, no bodies), except the
# controller-manager's and scheduler's own busy loops: tests count what a client
# (the operator, by its user agent) asks of the API server.
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "users": ["system:kube-controller-manager", "system:kube-scheduler"]},
        {"level": "Metadata"},
    ],
}


def _prepare_apiserver(layout: Layout) -> None:
    prepare_pki(layout)
    write_if_changed(_audit_policy(layout), yaml.safe_dump(_AUDIT_POLICY, sort_keys=False))


def pki_dir(layout: Layout) -> Path:
    return conf_dir(layout) / "pki"


def component_kubeconfig(layout: Layout, component: str) -> Path:
    """The kubeconfig of ``component`` (``kube-controller-manager``, ``kube-scheduler``
    or ``node-agent``); the admin's is ``layout.kubeconfig``."""
    return conf_dir(layout) / f"{component}.kubeconfig"


def node_agent_kubeconfig(layout: Layout) -> Path:
    return component_kubeconfig(layout, "node-agent")


def _pair(layout: Layout, name: str) -> pki.KeyPair:
    directory = pki_dir(layout)
    return pki.KeyPair(directory / f"{name}.crt", directory / f"{name}.key")


def ca_cert(layout: Layout) -> Path:
    """The stack's CA certificate: what a kubelet checks its clients against."""
    return _ca(layout).cert


def _ca(layout: Layout) -> pki.KeyPair:
    return _pair(layout, "ca")


def _sa_key(layout: Layout) -> Path:
    return pki_dir(layout) / "service-account.key"


def _sa_pub(layout: Layout) -> Path:
    return pki_dir(layout) / "service-account.pub"


_LOOPBACK_SERVER = pki.CertSpec(
    common_name="localhost", dns_names=("localhost",), ip_addresses=(ports.HOST,), server=True
)

# file stem -> what the certificate says; every one is signed by the stack's CA.
_CERTS: Mapping[str, pki.CertSpec] = {
    "apiserver": pki.CertSpec(
        common_name=APISERVER,
        dns_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        ip_addresses=(ports.HOST, SERVICE_IP),
        server=True,
    ),
    # The apiserver's identity towards kubelets (the node agent), for logs and exec.
    "apiserver-kubelet-client": pki.CertSpec(
        common_name="kube-apiserver-kubelet-client",
        organizations=("system:masters",),
        client=True,
    ),
    f"{CONTROLLER_MANAGER}-serving": _LOOPBACK_SERVER,
    f"{SCHEDULER}-serving": _LOOPBACK_SERVER,
    # For the node agent's own HTTPS endpoint (the kubelet API), if it serves one.
    "node-agent-serving": _LOOPBACK_SERVER,
    "admin": pki.CertSpec(ADMIN_USER, organizations=("system:masters",), client=True),
    CONTROLLER_MANAGER: pki.CertSpec("system:kube-controller-manager", client=True),
    SCHEDULER: pki.CertSpec("system:kube-scheduler", client=True),
    "node-agent": pki.CertSpec(NODE_AGENT_USER, organizations=(NODE_AGENT_GROUP,), client=True),
}


_FRONT_PROXY_CLIENT = pki.CertSpec(common_name="front-proxy-client", client=True)


def _kubeconfig(layout: Layout, user: str, client: pki.KeyPair) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {
                    "server": APISERVER_URL,
                    "certificate-authority-data": b64(_ca(layout).cert_pem()),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client.cert_pem()),
                    "client-key-data": b64(client.key_pem()),
                },
            }
        ],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": CLUSTER_NAME,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (atomically, owner-only) unless it already holds it."""
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.chmod(0o600)  # kubeconfigs embed private keys
    partial.replace(path)


def prepare_pki(layout: Layout) -> None:
    """Create (or keep) the CA, every certificate, the service-account key and the
    kubeconfigs. Idempotent; shared by the three servers' ``prepare``."""
    directory = pki_dir(layout)
    ca = pki.ensure_ca(directory, "ca", f"{CLUSTER_NAME}-ca")
    for stem, spec in _CERTS.items():
        pki.ensure_cert(directory, stem, ca, spec)
    # The aggregation layer's CA and client: without a requestheader CA the
    # controller-manager's and scheduler's delegated authentication log an error
    # every few seconds, and aggregated APIs (metrics-server) could not work.
    front_proxy_ca = pki.ensure_ca(directory, "front-proxy-ca", f"{CLUSTER_NAME}-front-proxy-ca")
    pki.ensure_cert(directory, "front-proxy-client", front_proxy_ca, _FRONT_PROXY_CLIENT)
    pki.ensure_public_key(_sa_key(layout), _sa_pub(layout))
    users = {
        "admin": (ADMIN_USER, layout.kubeconfig),
        CONTROLLER_MANAGER: ("system:kube-controller-manager", None),
        SCHEDULER: ("system:kube-scheduler", None),
        "node-agent": (NODE_AGENT_USER, None),
    }
    for stem, (user, path) in users.items():
        target = path or component_kubeconfig(layout, stem)
        write_if_changed(target, _kubeconfig(layout, user, _pair(layout, stem)))


def client_identity(
    layout: Layout, stem: str, user: str, groups: tuple[str, ...] = ()
) -> pki.KeyPair:
    """A client certificate ``<stem>.crt``/``<stem>.key`` naming ``user`` (in
    ``groups``), signed by the stack's CA, and its kubeconfig
    (:func:`component_kubeconfig`); idempotent. ``api_request(identity=stem)`` then
    acts as that user, with whatever RBAC grants it (nothing by default)."""
    directory = pki_dir(layout)
    ca = pki.ensure_ca(directory, "ca", f"{CLUSTER_NAME}-ca")
    spec = pki.CertSpec(user, organizations=groups, client=True)
    pair = pki.ensure_cert(directory, stem, ca, spec)
    write_if_changed(component_kubeconfig(layout, stem), _kubeconfig(layout, user, pair))
    return pair


def _apiserver_argv(layout: Layout) -> Sequence[str]:
    ca = _ca(layout)
    serving = _pair(layout, "apiserver")
    kubelet_client = _pair(layout, "apiserver-kubelet-client")
    front_proxy = _pair(layout, "front-proxy-client")
    return [
        str(binary(layout, APISERVER)),
        f"--etcd-servers={etcd.CLIENT_URL}",
        f"--cert-dir={conf_dir(layout) / 'apiserver-certs'}",
        f"--secure-port={ports.KUBE_APISERVER}",
        f"--bind-address={ports.HOST}",
        f"--advertise-address={ports.HOST}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={ca.cert}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        # PodSecurity is on by default; named so that nobody drops it: tests enforce
        # `restricted`. OwnerReferencesPermissionEnforcement (on in OpenShift and other
        # hardened clusters): an owner reference that blocks its owner's deletion needs
        # `update` on the owner's finalizers, which the chart's RBAC must then grant.
        "--enable-admission-plugins=PodSecurity,OwnerReferencesPermissionEnforcement",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={_sa_pub(layout)}",
        f"--service-account-signing-key-file={_sa_key(layout)}",
        f"--requestheader-client-ca-file={_pair(layout, 'front-proxy-ca').cert}",
        f"--requestheader-allowed-names={_FRONT_PROXY_CLIENT.common_name}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={front_proxy.cert}",
        f"--proxy-client-key-file={front_proxy.key}",
        # The `kubernetes` Service cannot have a loopback endpoint (the reconciler
        # fails every 10 s otherwise). In the stack's namespace its address is the
        # bridge's, which real nodes' kube-proxy routes the Service's ClusterIP to.
        *([] if netns.ENABLED else ["--endpoint-reconciler-type=none"]),
        f"--kubelet-client-certificate={kubelet_client.cert}",
        f"--kubelet-client-key={kubelet_client.key}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--profiling=false",
        f"--audit-policy-file={_audit_policy(layout)}",
        f"--audit-log-path={audit_log(layout)}",
        "--audit-log-format=json",
        "--audit-log-maxsize=100",
        "--audit-log-maxbackup=1",
        "--v=1",
    ]


def _component_auth_flags(layout: Layout, component: str, port: int) -> list[str]:
    kubeconfig = component_kubeconfig(layout, component)
    serving = _pair(layout, f"{component}-serving")
    return [
        f"--kubeconfig={kubeconfig}",
        # Delegated authn/authz for its own HTTPS port; /healthz is always allowed.
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={ports.HOST}",
        f"--secure-port={port}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        "--leader-elect=false",
        "--profiling=false",
    ]


def _controller_manager_argv(layout: Layout) -> Sequence[str]:
    ca = _ca(layout)
    return [
        str(binary(layout, CONTROLLER_MANAGER)),
        *_component_auth_flags(layout, CONTROLLER_MANAGER, ports.KUBE_CONTROLLER_MANAGER),
        f"--cluster-name={CLUSTER_NAME}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={_sa_key(layout)}",
        f"--root-ca-file={ca.cert}",
        f"--cluster-signing-cert-file={ca.cert}",
        f"--cluster-signing-key-file={ca.key}",
        f"--node-monitor-period={NODE_MONITOR_PERIOD}",
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE}",
        f"--node-startup-grace-period={NODE_STARTUP_GRACE}",
        # Taint (NoExecute) one lost node per second rather than one per ten seconds.
        "--node-eviction-rate=1",
        # Nodes of stopped agents stay registered (NotReady) in etcd between runs; with
        # the default threshold (0.55) they would put the zone into "partial
        # disruption", where a small cluster taints no lost node at all. Only a zone
        # with every node down counts as disrupted here.
        "--unhealthy-zone-threshold=1.0",
        *_controllers(),
        "--v=1",
    ]


def _controllers() -> list[str]:
    """The node agent's pod IPs are loopback addresses, which the API server refuses
    in Endpoints and EndpointSlices: there, the endpoint controllers would fail on
    every sync of a Service over a running pod (each driver has a headless one) with
    Warning Events, burying everyone else's, and nothing routes Services anyway. In
    the stack's namespace (real nodes) pods have real addresses, kube-proxy routes
    Services and the cluster DNS answers for them: every controller runs."""
    if netns.ENABLED:
        return []
    return [f"--controllers=*,{','.join(f'-{name}' for name in ENDPOINT_CONTROLLERS)}"]


def _scheduler_argv(layout: Layout) -> Sequence[str]:
    return [
        str(binary(layout, SCHEDULER)),
        *_component_auth_flags(layout, SCHEDULER, ports.KUBE_SCHEDULER),
        "--v=1",
    ]


def _client_context(layout: Layout, identity: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(_ca(layout).cert))
    pair = _pair(layout, identity)
    context.load_cert_chain(str(pair.cert), str(pair.key))
    return context


def api_request(
    layout: Layout,
    method: str,
    path: str,
    body: Mapping[str, object] | None = None,
    *,
    identity: str = "admin",
    content_type: str = "application/json",
    timeout: float = 5.0,
) -> tuple[int, bytes]:
    """One request to the apiserver as ``identity`` (a client certificate of this
    stack: ``admin``, ``node-agent``, ``kube-controller-manager``, ``kube-scheduler``):
    (HTTP status, response body). Raises ``OSError`` if the server is unreachable."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(APISERVER_URL + path, data=data, method=method)
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", content_type)
    context = _client_context(layout, identity)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def node_problem(layout: Layout, node: str) -> str | None:
    """Why the Node ``node`` is not Ready in the API (``None`` when it is)."""
    try:
        status, body = api_request(layout, "GET", f"/api/v1/nodes/{node}")
    except OSError as err:
        return f"kube-apiserver unreachable ({err})"
    if status != 200:
        return f"node {node} not registered ({status})"
    conditions = json.loads(body).get("status", {}).get("conditions") or []
    ready = [c.get("status") for c in conditions if c.get("type") == "Ready"]
    if ready != ["True"]:
        return f"node {node} not Ready ({ready})"
    return None


def group_binding(name: str, cluster_role: str, group: str) -> dict[str, object]:
    """A ClusterRoleBinding of the stack's: ``cluster_role`` for the members of ``group``."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "sluice-dev"},
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_role,
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }


def node_agent_binding() -> dict[str, object]:
    return group_binding(NODE_AGENT_BINDING, NODE_AGENT_CLUSTER_ROLE, NODE_AGENT_GROUP)


RBAC: Final = "/apis/rbac.authorization.k8s.io/v1"


def ensure_binding(layout: Layout, body: Mapping[str, Any]) -> tuple[int, bytes]:
    """Create the ClusterRoleBinding ``body`` unless it exists (:func:`ensure_created`)."""
    return ensure_created(layout, f"{RBAC}/clusterrolebindings", body)


def ensure_created(layout: Layout, collection: str, body: Mapping[str, Any]) -> tuple[int, bytes]:
    """Create the cluster-scoped object ``body`` in ``collection`` (an API path) unless
    it exists: (status, body) of the last request, 200 when it is in place (created
    meanwhile by another caller too)."""
    name = body["metadata"]["name"]
    status, answer = api_request(layout, "GET", f"{collection}/{name}")
    if status == 404:
        status, answer = api_request(layout, "POST", collection, body)
        if status in (201, 409):  # 409: created meanwhile by a concurrent caller
            status = 200
    return status, answer


def _apiserver_probe(layout: Layout) -> str | None:
    """Ready when /readyz answers 200 to the admin and the node agent's RBAC binding
    exists (created here on first success; see the module docstring)."""
    try:
        status, body = api_request(layout, "GET", "/readyz")
        if status != 200:
            return f"{APISERVER_URL}/readyz answered {status}: {body[-300:]!r}"
        status, body = ensure_binding(layout, node_agent_binding())
    except (OSError, ssl.SSLError) as err:
        return f"{APISERVER_URL} unreachable ({err})"
    if status != 200:
        return f"clusterrolebinding {NODE_AGENT_BINDING} not in place ({status}: {body[-300:]!r})"
    return None


def _controller_manager_probe(layout: Layout) -> str | None:
    """Healthy, and its controllers at work: /healthz answers before they have synced,
    so also wait for the ``default`` ServiceAccount its serviceaccount controller makes."""
    problem = http_ok(f"https://{ports.HOST}:{ports.KUBE_CONTROLLER_MANAGER}/healthz")
    if problem:
        return problem
    try:
        status, _body = api_request(
            layout, "GET", "/api/v1/namespaces/default/serviceaccounts/default"
        )
    except (OSError, ssl.SSLError) as err:
        return f"{APISERVER_URL} unreachable ({err})"
    return None if status == 200 else f"no default ServiceAccount yet ({status})"


def _scheduler_probe(_layout: Layout) -> str | None:
    return http_ok(f"https://{ports.HOST}:{ports.KUBE_SCHEDULER}/healthz")


def _exports(layout: Layout) -> Mapping[str, str]:
    return {"KUBECONFIG": str(layout.kubeconfig)}


SERVERS: tuple[Server, ...] = (
    Server(
        name=APISERVER,
        argv=_apiserver_argv,
        probe=_apiserver_probe,
        requires=(etcd.NAME,),
        artifacts=(NAME,),
        prepare=_prepare_apiserver,
        exports=_exports,
        start_timeout=120.0,
        stop_grace=15.0,
    ),
    Server(
        name=CONTROLLER_MANAGER,
        argv=_controller_manager_argv,
        probe=_controller_manager_probe,
        requires=(APISERVER,),
        artifacts=(NAME,),
        prepare=prepare_pki,
        start_timeout=90.0,
        stop_grace=10.0,
    ),
    Server(
        name=SCHEDULER,
        argv=_scheduler_argv,
        probe=_scheduler_probe,
        requires=(APISERVER,),
        artifacts=(NAME,),
        prepare=prepare_pki,
        start_timeout=90.0,
        stop_grace=10.0,
    ),
)
