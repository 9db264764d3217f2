"""The Kubernetes objects the stack creates for its monitoring: the namespace, the
``Prometheus`` custom resource the operator generates a configuration from, the
Secret naming Alertmanager, and least-privilege RBAC for the three identities
(the operator, Prometheus's service discovery, the config reloader).

Pure: each function returns a plain manifest; :mod:`sluice_dev.monitoring.apply`
applies them. Nothing here scrapes anything: which pods and Services are scraped,
and how they are labelled, comes from the chart's monitors through the operator.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

NAMESPACE: Final = "sluice-monitoring"
PROMETHEUS: Final = "sluice"
"""The ``Prometheus`` resource's name: the operator's Secret is ``prometheus-sluice``."""
ALERTMANAGERS_SECRET: Final = "sluice-alertmanagers"
ALERTMANAGERS_KEY: Final = "alertmanagers.yaml"
MANAGED_BY: Final = {"app.kubernetes.io/managed-by": "sluice-dev"}

OPERATOR_USER: Final = "sluice:prometheus-operator"
PROMETHEUS_USER: Final = "sluice:prometheus"
RELOADER_USER: Final = "sluice:monitoring-reloader"

Rule = dict[str, list[str]]


def config_secret() -> str:
    """The Secret holding the operator's generated configuration (``prometheus.yaml.gz``)."""
    return f"prometheus-{PROMETHEUS}"


def rule_config_map_prefix() -> str:
    """The operator's rule ConfigMaps are ``prometheus-sluice-rulefiles-0``, ``-1``, ..."""
    return f"prometheus-{PROMETHEUS}-rulefiles-"


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(NAMESPACE)}


def rule(groups: Sequence[str], resources: Sequence[str], verbs: Sequence[str]) -> Rule:
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


READ: Final = ("get", "list", "watch")
WRITE: Final = ("get", "list", "watch", "create", "update", "patch", "delete")
MONITORING_GROUP: Final = "monitoring.coreos.com"


@dataclass(frozen=True)
class Grant:
    """One identity's rights: cluster-wide rules and rules in ``NAMESPACE`` only."""

    name: str
    """The roles' and bindings' name (``sluice:prometheus-operator``)."""
    user: str
    cluster: tuple[Rule, ...]
    local: tuple[Rule, ...] = ()

    def objects(self) -> list[dict[str, Any]]:
        """The ClusterRole and its binding, then the Role and its binding if any."""
        found = [self._role("ClusterRole", self.cluster), self._binding("ClusterRoleBinding")]
        if self.local:
            found += [self._role("Role", self.local), self._binding("RoleBinding")]
        return found

    def _namespace(self, kind: str) -> str | None:
        return NAMESPACE if kind in ("Role", "RoleBinding") else None

    def _role(self, kind: str, rules: Sequence[Rule]) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": _meta(self.name, self._namespace(kind)),
            "rules": list(rules),
        }

    def _binding(self, kind: str) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": _meta(self.name, self._namespace(kind)),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": kind.removesuffix("Binding"),
                "name": self.name,
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": self.user}
            ],
        }


def operator_grant() -> Grant:
    """What the operator's Prometheus controller needs, and nothing for the controllers
    the stack does not use (Alertmanager, PrometheusAgent, ThanosRuler: without their
    rights the operator leaves them off). It reads monitors and rules everywhere and
    writes only in ``NAMESPACE``, the one instance namespace it is given
    (``--prometheus-instance-namespaces``): the generated Secret, the rule ConfigMaps,
    a StatefulSet of zero replicas and its governing Service."""
    return Grant(
        name=OPERATOR_USER,
        user=OPERATOR_USER,
        cluster=(
            rule(
                [MONITORING_GROUP],
                ["servicemonitors", "podmonitors", "probes", "prometheusrules", "scrapeconfigs"],
                READ,
            ),
            rule([""], ["namespaces"], READ),
            rule([""], ["events"], ["create", "patch"]),
            rule(["storage.k8s.io"], ["storageclasses"], ["get"]),
        ),
        local=(
            rule(
                [MONITORING_GROUP],
                ["prometheuses", "prometheuses/status", "prometheuses/finalizers"],
                WRITE,
            ),
            rule([""], ["secrets", "configmaps"], WRITE),
            rule(["apps"], ["statefulsets"], WRITE),
            rule([""], ["services", "services/finalizers"], WRITE),
            rule([""], ["pods"], ["list", "delete"]),
        ),
    )


def prometheus_grant() -> Grant:
    """Prometheus's Kubernetes service discovery: read pods, Services, Endpoints,
    EndpointSlices and nodes (upstream's own ``prometheus`` ClusterRole, less
    ``/metrics`` and ingresses)."""
    return Grant(
        name=PROMETHEUS_USER,
        user=PROMETHEUS_USER,
        cluster=(
            rule([""], ["pods", "services", "endpoints", "nodes"], READ),
            rule(["discovery.k8s.io"], ["endpointslices"], READ),
        ),
    )


def reloader_grant() -> Grant:
    """The config reloader reads the operator's output in ``NAMESPACE``; as the stand-in
    for the EndpointSlice controller it reads pods and Services and writes
    EndpointSlices everywhere."""
    return Grant(
        name=RELOADER_USER,
        user=RELOADER_USER,
        cluster=(
            rule([""], ["pods", "services"], READ),
            rule(["discovery.k8s.io"], ["endpointslices"], WRITE),
        ),
        local=(rule([""], ["secrets", "configmaps"], READ),),
    )


def alertmanagers_secret(address: str) -> dict[str, Any]:
    """Where Prometheus sends alerts: one Alertmanager at ``address`` (``host:port``),
    in Prometheus's own ``alertmanagers`` format, which the operator appends to the
    configuration it generates (``additionalAlertManagerConfigs``)."""
    configs = [{"api_version": "v2", "static_configs": [{"targets": [address]}]}]
    text = yaml.safe_dump(configs, sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(ALERTMANAGERS_SECRET, NAMESPACE),
        "type": "Opaque",
        "data": {ALERTMANAGERS_KEY: base64.b64encode(text.encode()).decode()},
    }


@dataclass(frozen=True)
class ApiServer:
    """How Prometheus, a process outside the cluster, reaches the API server: its URL,
    the CA that signed its certificate and a client certificate (files on this
    machine, which the operator copies into the configuration as paths)."""

    url: str
    ca_file: str
    cert_file: str
    key_file: str


def prometheus(api_server: ApiServer, version: str, *, interval: str = "5s") -> dict[str, Any]:
    """The ``Prometheus`` resource the operator generates the configuration from.

    ``replicas: 0``: the operator generates the configuration Secret and rule
    ConfigMaps and keeps a StatefulSet of no pods; the stack's ``prometheus`` process
    is the server (node-agent pods run as local processes, and a Prometheus pod
    could not mount its configuration here). Empty selectors select every
    ServiceMonitor, PodMonitor, ScrapeConfig and PrometheusRule in every namespace,
    as a cluster's shared Prometheus would (a ScrapeConfig names a target that is not
    a pod: the demo's operator, a process of the stack); ``EndpointSlice`` discovery
    for ServiceMonitors, since Endpoints cannot hold the node agent's loopback pod IPs (see
    :mod:`sluice_dev.monitoring.endpointslices`). ``version`` is the Prometheus the
    stack runs, so the operator generates configuration for it."""
    everything: dict[str, Any] = {}
    return {
        "apiVersion": f"{MONITORING_GROUP}/v1",
        "kind": "Prometheus",
        "metadata": _meta(PROMETHEUS, NAMESPACE),
        "spec": {
            "replicas": 0,
            "version": version,
            "serviceDiscoveryRole": "EndpointSlice",
            "scrapeInterval": interval,
            "evaluationInterval": interval,
            "serviceMonitorSelector": everything,
            "serviceMonitorNamespaceSelector": everything,
            "podMonitorSelector": everything,
            "podMonitorNamespaceSelector": everything,
            "scrapeConfigSelector": everything,
            "scrapeConfigNamespaceSelector": everything,
            "ruleSelector": everything,
            "ruleNamespaceSelector": everything,
            "apiserverConfig": {
                "host": api_server.url,
                "tlsConfig": {
                    "caFile": api_server.ca_file,
                    "certFile": api_server.cert_file,
                    "keyFile": api_server.key_file,
                },
            },
            "additionalAlertManagerConfigs": {
                "name": ALERTMANAGERS_SECRET,
                "key": ALERTMANAGERS_KEY,
            },
        },
    }


PLURALS: Final[Mapping[str, str]] = {
    "Namespace": "namespaces",
    "Secret": "secrets",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Prometheus": "prometheuses",
    "EndpointSlice": "endpointslices",
}


def object_path(body: Mapping[str, Any]) -> str:
    """The API path of ``body`` (one of the kinds above), for a server-side apply."""
    api_version, kind = body["apiVersion"], body["kind"]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    meta = body["metadata"]
    where = f"/namespaces/{meta['namespace']}" if "namespace" in meta else ""
    return f"{prefix}{where}/{PLURALS[kind]}/{meta['name']}"
