"""The pure parts of the stack's monitoring: the config reloader's rendering of the
operator's Secret and rule ConfigMaps, the EndpointSlices that stand in for the
disabled controller, the objects the stack creates, and how provisioning and ``up``
treat the monitoring servers (off unless asked for)."""

from __future__ import annotations

import base64
import gzip
from typing import Any

import pytest
import yaml

from sluice_dev import registry, stack
from sluice_dev.monitoring import endpointslices, promconfig, resources

pytestmark = pytest.mark.unit

GENERATED = """\
global:
  evaluation_interval: 5s
  scrape_interval: 5s
  external_labels:
    prometheus: sluice-monitoring/sluice
    prometheus_replica: $(POD_NAME)
rule_files:
- /etc/prometheus/rules/prometheus-sluice-rulefiles-0/*.yaml
scrape_configs:
- job_name: podMonitor/ns/sl-drivers/0
  relabel_configs:
  - source_labels: [__tmp_hash, __tmp_disable_sharding]
    regex: $(SHARD);|.+;.+
    action: keep
"""


def secret(text: str) -> dict[str, Any]:
    payload = base64.b64encode(gzip.compress(text.encode())).decode()
    return {"data": {promconfig.CONFIG_KEY: payload}}


def render(text: str, config_maps: list[dict[str, Any]] | None = None) -> dict[str, str]:
    return promconfig.render(
        secret(text),
        config_maps or [],
        prefix=resources.rule_config_map_prefix(),
        rules_dir="/stack/conf/prometheus/rules",
        env=promconfig.pod_env(resources.PROMETHEUS),
    )


def test_the_reloader_expands_the_pod_variables_and_mounts_the_rules_by_path() -> None:
    files = render(GENERATED)
    config = yaml.safe_load(files["prometheus.yaml"])
    assert config["global"]["external_labels"]["prometheus_replica"] == "prometheus-sluice-0"
    assert config["scrape_configs"][0]["relabel_configs"][0]["regex"] == "0;|.+;.+"
    assert config["rule_files"] == [
        "/stack/conf/prometheus/rules/prometheus-sluice-rulefiles-0/*.yaml"
    ]
    assert config["scrape_configs"][0]["job_name"] == "podMonitor/ns/sl-drivers/0"


def test_rule_files_come_from_the_operators_config_maps_only() -> None:
    maps = [
        {
            "metadata": {"name": "prometheus-sluice-rulefiles-0"},
            "data": {"ns-sl.yaml": "groups: []\n"},
        },
        {"metadata": {"name": "someone-else"}, "data": {"x.yaml": "groups: []\n"}},
    ]
    files = render(GENERATED, maps)
    assert set(files) == {"prometheus.yaml", "rules/prometheus-sluice-rulefiles-0/ns-sl.yaml"}


def test_an_unknown_variable_is_left_as_it_is() -> None:
    assert promconfig.expand("a $(NODE_NAME) b $(SHARD)", {"SHARD": "0"}) == "a $(NODE_NAME) b 0"


def test_a_secret_without_the_configuration_names_the_key() -> None:
    with pytest.raises(promconfig.ConfigError, match=r"prometheus\.yaml\.gz"):
        promconfig.decode_config({"data": {"other": ""}})


def pod(name: str, ip: str, labels: dict[str, str], *, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels},
        "spec": {
            "nodeName": "sluice-node-a",
            "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}],
        },
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


SERVICE: dict[str, Any] = {
    "metadata": {"name": "sl-sluice-metrics", "namespace": "ns", "uid": "svc-uid"},
    "spec": {
        "selector": {"app": "op"},
        "ports": [{"name": "http-metrics", "port": 80, "targetPort": "http", "protocol": "TCP"}],
    },
}


def test_a_service_gets_an_fqdn_slice_of_its_running_pods_on_their_pod_ips() -> None:
    pods = [
        pod("op-1", "127.83.12.201", {"app": "op"}),
        pod("other", "127.83.12.202", {"app": "other"}),
        pod("done", "127.83.12.203", {"app": "op"}, phase="Succeeded"),
    ]
    [made] = endpointslices.slices_for(SERVICE, pods)
    assert made["addressType"] == "FQDN"
    assert made["metadata"]["labels"][endpointslices.SERVICE_NAME_LABEL] == "sl-sluice-metrics"
    assert [e["addresses"] for e in made["endpoints"]] == [["127.83.12.201"]]
    assert made["endpoints"][0]["targetRef"] == {
        "kind": "Pod",
        "namespace": "ns",
        "name": "op-1",
        "uid": "uid-op-1",
    }
    assert made["ports"] == [{"name": "http-metrics", "port": 8080, "protocol": "TCP"}]
    owner = made["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], "blockOwnerDeletion" in owner) == (
        "Service",
        "svc-uid",
        False,
    )


def test_no_slice_for_a_service_without_a_selector_or_without_pods() -> None:
    unselected = {**SERVICE, "spec": {"ports": SERVICE["spec"]["ports"]}}
    assert endpointslices.slices_for(unselected, [pod("a", "127.0.0.9", {"app": "op"})]) == []
    assert endpointslices.slices_for(SERVICE, []) == []


def test_a_slice_is_rewritten_only_when_its_content_changes() -> None:
    first = endpointslices.slices_for(SERVICE, [pod("op-1", "127.83.12.201", {"app": "op"})])[0]
    again = endpointslices.slices_for(SERVICE, [pod("op-1", "127.83.12.201", {"app": "op"})])[0]
    moved = endpointslices.slices_for(SERVICE, [pod("op-1", "127.83.12.209", {"app": "op"})])[0]
    stored = {**first, "endpoints": [{**first["endpoints"][0], "zone": "defaulted"}]}
    assert endpointslices.same(stored, again)
    assert not endpointslices.same(stored, moved)


def test_the_prometheus_resource_runs_no_pods_and_selects_every_monitor() -> None:
    api = resources.ApiServer("https://127.0.0.1:16443", "/ca.crt", "/p.crt", "/p.key")
    spec = resources.prometheus(api, "v3.16.0")["spec"]
    assert spec["replicas"] == 0
    for selector in ("serviceMonitor", "podMonitor", "rule"):
        assert spec[f"{selector}Selector"] == {}
        assert spec[f"{selector}NamespaceSelector"] == {}
    assert spec["apiserverConfig"]["tlsConfig"]["certFile"] == "/p.crt"
    assert spec["serviceDiscoveryRole"] == "EndpointSlice"


def test_the_alertmanager_secret_is_prometheus_alertmanagers_config() -> None:
    body = resources.alertmanagers_secret("127.0.0.1:19193")
    text = base64.b64decode(body["data"][resources.ALERTMANAGERS_KEY]).decode()
    assert yaml.safe_load(text) == [
        {"api_version": "v2", "static_configs": [{"targets": ["127.0.0.1:19193"]}]}
    ]


def test_the_operator_writes_only_in_the_monitoring_namespace() -> None:
    grant = resources.operator_grant()
    writes = [r for r in grant.cluster if set(r["verbs"]) - {"get", "list", "watch"}]
    assert all(r["resources"] == ["events"] for r in writes)
    kinds = [(o["kind"], o["metadata"].get("namespace")) for o in grant.objects()]
    assert ("Role", resources.NAMESPACE) in kinds
    assert ("ClusterRole", None) in kinds


def test_object_paths() -> None:
    assert resources.object_path(resources.namespace()) == "/api/v1/namespaces/sluice-monitoring"
    api = resources.ApiServer("u", "c", "k", "e")
    assert resources.object_path(resources.prometheus(api, "v3.16.0")) == (
        "/apis/monitoring.coreos.com/v1/namespaces/sluice-monitoring/prometheuses/sluice"
    )


def test_monitoring_is_neither_provisioned_nor_started_unless_asked_for() -> None:
    monitoring = {a.name for a in registry.MONITORING_ARTIFACTS}
    assert monitoring == {"prometheus-operator", "prometheus", "alertmanager"}
    assert not monitoring & {a.name for a in registry.provisioned()}
    assert monitoring <= {a.name for a in registry.provisioned(monitoring=True)}
    assert "monitoring" not in [s.name for s in stack.with_requirements(None)]
    started = [s.name for s in stack.with_requirements(["monitoring"])]
    assert {"prometheus-operator", "prometheus", "alertmanager", "kube-apiserver"} <= set(started)
    assert started[-1] == "monitoring"
