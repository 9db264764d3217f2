"""``monitoring``: the name ``sluice-dev up monitoring`` starts, and its own process.

It requires the three monitoring servers (the Prometheus Operator, Prometheus and
Alertmanager, each optional and a process of the stack) and, once they are healthy,
creates what joins them: the ``Prometheus`` resource the operator generates a
configuration from (:func:`sluice_dev.monitoring.resources.prometheus`, with the
API server's address and a client certificate of Prometheus's own for discovery)
and the Secret naming Alertmanager. Its process (``python -m
sluice_dev.monitoring``) is the config reloader and the EndpointSlice stand-in; it is
healthy once Prometheus has loaded the operator's configuration.

Nothing here says what to scrape: Prometheus's configuration is the operator's,
generated from the monitors and rules in the cluster (the chart's, when installed
with ``metrics.podMonitor.enabled``, ``metrics.serviceMonitor.enabled`` and
``prometheusRule.enabled``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Final

from sluice_dev.artifacts import Artifact
from sluice_dev.monitoring import apply, reloader, resources
from sluice_dev.paths import Layout
from sluice_dev.servers import alertmanager, kube, prometheus, prometheus_operator
from sluice_dev.servers.base import Server
from sluice_dev.servers.tools import prometheus_release

NAME: Final = "monitoring"
PROMETHEUS_IDENTITY: Final = "prometheus"
RELOADER_IDENTITY: Final = "monitoring-reloader"


def api_server(layout: Layout) -> resources.ApiServer:
    """Prometheus's way to the API server: its own client certificate (RBAC:
    :func:`sluice_dev.monitoring.resources.prometheus_grant`)."""
    pair = kube.client_identity(layout, PROMETHEUS_IDENTITY, resources.PROMETHEUS_USER)
    return resources.ApiServer(
        url=kube.APISERVER_URL,
        ca_file=str(kube.ca_cert(layout)),
        cert_file=str(pair.cert),
        key_file=str(pair.key),
    )


def _prepare(layout: Layout) -> None:
    kube.client_identity(layout, RELOADER_IDENTITY, resources.RELOADER_USER)
    apply.apply_all(layout, resources.prometheus_grant().objects())
    apply.apply_all(layout, resources.reloader_grant().objects())
    apply.apply(layout, resources.alertmanagers_secret(alertmanager.ADDRESS))
    version = f"v{prometheus_release()}"
    apply.apply(layout, resources.prometheus(api_server(layout), version))
    (prometheus.conf_dir(layout) / reloader.SYNCED).unlink(missing_ok=True)


def _argv(layout: Layout) -> Sequence[str]:
    return [
        sys.executable,
        "-m",
        "sluice_dev.monitoring",
        f"--identity={RELOADER_IDENTITY}",
        f"--conf={prometheus.conf_dir(layout)}",
        f"--prometheus={prometheus.URL}",
    ]


def _env(layout: Layout) -> Mapping[str, str]:
    return {"SLUICE_STACK_DIR": str(layout.stack), "SLUICE_CACHE": str(layout.cache)}


def _probe(layout: Layout) -> str | None:
    return reloader.synced(prometheus.conf_dir(layout))


ARTIFACTS: tuple[Artifact, ...] = (
    *prometheus_operator.ARTIFACTS,
    *prometheus.ARTIFACTS,
    *alertmanager.ARTIFACTS,
)
SERVERS: tuple[Server, ...] = (
    *prometheus_operator.SERVERS,
    *prometheus.SERVERS,
    *alertmanager.SERVERS,
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        requires=(
            kube.APISERVER,
            prometheus_operator.NAME,
            prometheus.NAME,
            alertmanager.NAME,
        ),
        prepare=_prepare,
        env=_env,
        start_timeout=90.0,
        stop_grace=5.0,
        optional=True,
    ),
)
