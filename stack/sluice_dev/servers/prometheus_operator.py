"""The Prometheus Operator as a process of the stack: what turns the chart's
PodMonitor, ServiceMonitor and PrometheusRule into Prometheus's configuration.

Its controller (``cmd/operator``) is built from ``github.com/prometheus-operator/
prometheus-operator`` at a pinned release, and its CRDs are the YAML files that
release ships (``example/prometheus-operator-crd``), copied from the module cache
into the artifact by the same build and applied before the operator starts.

It runs outside the cluster, as a user of its own (``sluice:prometheus-operator``,
a client certificate and a kubeconfig in ``KUBECONFIG``, which the operator reads)
with least-privilege RBAC (:func:`sluice_dev.monitoring.resources.operator_grant`):
only its Prometheus controller has the rights it checks for, so the Alertmanager,
PrometheusAgent and ThanosRuler controllers stay off (a warning each at start-up:
"missing permission on resource"), and it writes only in the one instance namespace
it is given. Optional: it starts only when named (``sluice-dev up monitoring``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from sluice_dev import ports, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, GoBuild, ModuleFiles, go_artifact
from sluice_dev.monitoring import apply, resources
from sluice_dev.paths import Layout
from sluice_dev.probes import http_ok
from sluice_dev.servers import kube
from sluice_dev.servers.base import Server
from sluice_dev.servers.tools import stamp_flags

NAME: Final = "prometheus-operator"
MODULE: Final = "github.com/prometheus-operator/prometheus-operator"
URL: Final = f"http://{ports.HOST}:{ports.PROMETHEUS_OPERATOR}"
CRDS: Final = "crds"
IDENTITY: Final = "prometheus-operator"
"""The stem of its certificate and kubeconfig in the stack's PKI directory."""

ARTIFACT = go_artifact(
    NAME,
    versions.PROMETHEUS_OPERATOR,
    GoBuild(
        STACK_SRC / "go" / "prometheus-operator",
        (f"{MODULE}/cmd/operator",),
        ldflags=tuple(
            stamp_flags(
                {
                    "github.com/prometheus/common/version.Version": versions.PROMETHEUS_OPERATOR,
                    "github.com/prometheus/common/version.Branch": "HEAD",
                }
            )
        ),
        copies=(ModuleFiles(MODULE, "example/prometheus-operator-crd/*.yaml", CRDS),),
    ),
)
ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)


def binary(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / "bin" / "operator"


def crds(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / CRDS


def kubeconfig(layout: Layout) -> Path:
    return kube.component_kubeconfig(layout, IDENTITY)


def _prepare(layout: Layout) -> None:
    """Its identity, its CRDs (Established), its namespace and RBAC."""
    kube.client_identity(layout, IDENTITY, resources.OPERATOR_USER)
    apply.install_crds(layout, crds(layout))
    apply.apply(layout, resources.namespace())
    apply.apply_all(layout, resources.operator_grant().objects())


def _argv(layout: Layout) -> Sequence[str]:
    return [
        str(binary(layout)),
        f"--web.listen-address={ports.HOST}:{ports.PROMETHEUS_OPERATOR}",
        f"--prometheus-instance-namespaces={resources.NAMESPACE}",
        "--log-level=info",
    ]


def _env(layout: Layout) -> Mapping[str, str]:
    return {"KUBECONFIG": str(kubeconfig(layout))}


def _probe(_layout: Layout) -> str | None:
    return http_ok(f"{URL}/healthz")


SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        requires=(kube.APISERVER,),
        artifacts=(NAME,),
        prepare=_prepare,
        env=_env,
        start_timeout=90.0,
        stop_grace=10.0,
        optional=True,
    ),
)
