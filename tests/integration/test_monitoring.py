"""The chart's monitoring, live: ``sluice-dev up monitoring`` runs the real Prometheus
Operator, Prometheus and Alertmanager, the chart is installed with its PodMonitor,
ServiceMonitor and PrometheusRule on, and Prometheus, configured by nothing but the
operator, scrapes the chart's operator (``job="sluice-operator"``) and a driver pod
(``job="sluice-driver"``, labelled with its pipeline and namespace by the
PodMonitor's relabelings), has every shipped alert loaded and reaches Alertmanager.

The driver is a pod the helm-installed operator created for a StreamingPipeline, with
the operator's labels and ports; it runs the stand-in driver
(``tests/support/standin``), which serves the ``sluice_`` series the operator reads on
its pod IP, as the real driver does, without Spark, Kafka or Cassandra. Elapsed times
are printed (pytest -s).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Namespace

from sluice_dev import demoalerts
from sluice_dev.monitoring import client, resources
from sluice_dev.monitoring import rules as alert_rules
from sluice_dev.paths import Layout
from sluice_dev.servers import alertmanager, nodeagent, prometheus
from sluice_operator import naming
from tests.support.agents import free_port
from tests.support.helm import CHART, operator_pods
from tests.support.helm import runner as helm_runner
from tests.support.monitored_fleet import OPERATOR_IMAGE, chart_values, operator_root
from tests.support.operator import Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.monitoring]


@pytest.fixture
def watched(core: Any) -> Iterator[str]:
    """The namespace the chart's operator watches: its drivers run there."""
    name = f"mon-drivers-{uuid.uuid4().hex[:6]}"
    core.create_namespace(V1Namespace.model_validate({"metadata": {"name": name}}))
    yield name
    core.delete_namespace(name)


def target(job: str, **labels: str) -> Callable[[], dict[str, Any] | None]:
    """A condition: Prometheus's target of ``job`` with ``labels``, healthy."""

    def found() -> dict[str, Any] | None:
        for item in client.active_targets(prometheus.URL):
            have = {**item["labels"], "health": item["health"]}
            if all(have.get(k) == v for k, v in {"job": job, "health": "up", **labels}.items()):
                return item
        return None

    return found


@pytest.fixture
def release(
    monitoring: Layout,
    helm_binary: Path,
    sluice_crd: str,
    standin_image: str,
    core: Any,
    namespace: str,
    watched: str,
    tmp_path: Path,
) -> Iterator[str]:
    """The chart installed with every monitoring object on, scraping every 5 s; the
    release name. Uninstalled afterwards."""
    nodeagent.register_image(monitoring, OPERATOR_IMAGE, operator_root(tmp_path / "image"))
    helm = helm_runner(helm_binary, monitoring, tmp_path)
    name = f"sl-{uuid.uuid4().hex[:6]}"
    values = chart_values(watched, free_port(), "dev")
    helm("install", name, str(CHART), "-n", namespace, "--wait", "--timeout=120s", *values)
    yield name
    helm("uninstall", name, "-n", namespace, "--wait", "--timeout=120s")
    wait_for(lambda: not operator_pods(core, namespace, name), timeout=120, what="operator gone")


def test_the_charts_monitors_and_rules_reach_prometheus_through_the_operator(
    release: str, custom: Any, core: Any, namespace: str, watched: str
) -> None:
    started = time.monotonic()

    def since() -> str:
        return f"{time.monotonic() - started:5.1f}s"

    # The monitors and the rule are the chart's; the operator made the configuration.
    kinds = {"servicemonitors", "podmonitors", "prometheusrules"}
    for plural in kinds:
        listed = custom.list_namespaced_custom_object(
            resources.MONITORING_GROUP, "v1", namespace, plural
        )["items"]
        assert [item["metadata"]["labels"]["app.kubernetes.io/instance"] for item in listed] == [
            release
        ], plural

    # The operator's own Service, through the ServiceMonitor and the EndpointSlice
    # stand-in: job="sluice-operator", the label SluiceOperatorDown reads.
    scraped = wait_for(
        target("sluice-operator", namespace=namespace),
        timeout=120,
        interval=1.0,
        what='the operator\'s target up with job="sluice-operator"',
        ignoring=(client.ApiError,),
    )
    print(f"install -> operator scraped: {since()} ({scraped['scrapeUrl']})")
    [operator_pod] = operator_pods(core, namespace, release)
    assert scraped["labels"]["pod"] == operator_pod.metadata.name
    assert scraped["scrapeUrl"].startswith(f"http://{operator_pod.status.pod_ip}:")

    # Every alert of the chart's PrometheusRule, loaded from the operator's ConfigMap.
    wanted = set(alert_rules.rules())
    loaded = wait_for(
        lambda: (lambda names: names if wanted <= names else None)(
            client.alert_rule_names(prometheus.URL)
        ),
        timeout=60,
        interval=1.0,
        what=f"the alerts {sorted(wanted)} in /api/v1/rules",
        ignoring=(client.ApiError,),
    )
    print(f"install -> {len(wanted)} alerts loaded: {since()}")
    assert wanted <= loaded

    # Alertmanager, from the Prometheus resource's additionalAlertManagerConfigs.
    reached = wait_for(
        lambda: [u for u in client.alertmanagers(prometheus.URL) if alertmanager.ADDRESS in u],
        timeout=60,
        interval=1.0,
        what="Alertmanager among Prometheus's alertmanagers",
        ignoring=(client.ApiError,),
    )
    assert reached == [f"{alertmanager.URL}/api/v2/alerts"]
    assert isinstance(client.alerts(alertmanager.URL), list)

    # A driver pod of a running pipeline, through the PodMonitor: job="sluice-driver",
    # pipeline="<namespace>/<name>" and namespace from Kubernetes, not from the driver.
    pipeline = Pipeline(custom, core, watched, "kpis")
    pipeline.create(standin_spec(metrics=True))
    try:
        running = pipeline.wait_phase("Running", timeout=120)
        created = time.monotonic()
        labels = {"pipeline": f"{watched}/kpis", "namespace": watched}
        driver = wait_for(
            target("sluice-driver", **labels),
            timeout=90,
            interval=1.0,
            what=f'the driver\'s target up with job="sluice-driver" and {labels}',
            ignoring=(client.ApiError,),
        )
        print(f"pipeline Running -> driver scraped: {time.monotonic() - created:.1f}s")
        [pod] = pipeline.live_pods()
        assert pod.metadata.name == naming.driver_pod("kpis", running["epoch"])
        assert driver["labels"]["pod"] == pod.metadata.name
        assert driver["scrapeUrl"] == f"http://{pod.status.pod_ip}:8090/metrics"
        # By the target's address: a pod of the same name in an earlier test's
        # namespace may still have a series within the query's lookback.
        instance = driver["labels"]["instance"]
        series = wait_for(
            lambda: client.query(
                prometheus.URL, f'sluice_epoch{{job="sluice-driver", instance="{instance}"}}'
            ),
            timeout=30,
            interval=1.0,
            what="the driver's sluice_epoch in Prometheus",
            ignoring=(client.ApiError,),
        )
        assert [(s["metric"]["pipeline"], s["metric"]["namespace"]) for s in series] == [
            (f"{watched}/kpis", watched)
        ]
        assert series[0]["value"][1] == str(running["epoch"])
    finally:
        pipeline.delete()
        wait_for(lambda: pipeline.get() is None, timeout=60, what="the pipeline deleted")


def test_the_demos_scrape_config_puts_an_operator_process_under_the_operator_job(
    monitoring: Layout, sluice_crd: str, custom: Any, namespace: str, operators: Any
) -> None:
    """``make demo-alerts``: the demo's operator is a process of the stack, not a pod a
    ServiceMonitor finds; the ScrapeConfig the demo applies must get its series into
    Prometheus under ``job="sluice-operator"``, the job the rules read, or
    SluiceOperatorDown fires for a running operator and the operator's alerts see
    nothing."""
    operator = operators.start()
    body = demoalerts.operator_scrape(namespace, operator.http_port)
    custom.create_namespaced_custom_object(
        resources.MONITORING_GROUP, "v1alpha1", namespace, "scrapeconfigs", body
    )
    wait_for(
        target(demoalerts.OPERATOR_JOB, instance=f"127.0.0.1:{operator.http_port}"),
        timeout=120,
        what="the operator process scraped under the operator job",
    )
    series = wait_for(
        lambda: client.query(
            prometheus.URL,
            f'count({{job="{demoalerts.OPERATOR_JOB}", __name__=~"sluice_operator_.+"}})',
        ),
        timeout=60,
        what="the operator's sluice_operator_ series in Prometheus",
    )
    assert int(series[0]["value"][1]) > 0
    custom.delete_namespaced_custom_object(
        resources.MONITORING_GROUP, "v1alpha1", namespace, "scrapeconfigs", body["metadata"]["name"]
    )
