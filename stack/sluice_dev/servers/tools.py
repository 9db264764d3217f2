"""Command-line tools the project needs beside the servers: helm and promtool.

Both are built from private Go modules under ``stack/go`` at pinned releases: helm to
install and render the chart against the local API server, promtool to check the
chart's alerting rules. They run no server, so this module registers artifacts only.
Each binary is stamped with its release (``-X`` linker flags, as upstream's own
builds do) so that ``helm version`` and ``promtool --version`` tell the truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sluice_dev import versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, GoBuild, go_artifact
from sluice_dev.paths import Layout
from sluice_dev.servers.base import Server


def stamp_flags(stamps: Mapping[str, str]) -> list[str]:
    """``-X symbol=value`` linker flags that set each string variable in ``stamps``."""
    return [f"-X {symbol}={value}" for symbol, value in stamps.items()]


def _kube_minor() -> str:
    return versions.KUBERNETES.split(".")[1]


def _helm_stamps() -> dict[str, str]:
    # The same stamps as helm's Makefile; the Kubernetes version is the default that
    # `helm template` assumes when it has no cluster to ask.
    return {
        "helm.sh/helm/v3/internal/version.version": f"v{versions.HELM}",
        "helm.sh/helm/v3/internal/version.gitTreeState": "clean",
        "helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor": "1",
        "helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor": _kube_minor(),
        "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor": "1",
        "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor": _kube_minor(),
    }


def prometheus_release() -> str:
    """The Prometheus release of the pinned Go module version: v0.316.0 is 3.16.0."""
    _zero, combined, patch = versions.PROMETHEUS.split(".")
    return f"{int(combined) // 100}.{int(combined) % 100}.{patch}"


def _promtool_stamps() -> dict[str, str]:
    return {
        "github.com/prometheus/common/version.Version": prometheus_release(),
        "github.com/prometheus/common/version.Branch": "HEAD",
    }


HELM = go_artifact(
    "helm",
    versions.HELM,
    GoBuild(
        STACK_SRC / "go" / "helm",
        ("helm.sh/helm/v3/cmd/helm",),
        ldflags=tuple(stamp_flags(_helm_stamps())),
    ),
)
# The project only runs `promtool check rules` and `test rules`: Prometheus's
# documented `remove_all_sd` tag leaves out every service-discovery plugin (the
# cloud SDKs), which is most of what a full build compiles.
PROMTOOL = go_artifact(
    "promtool",
    versions.PROMETHEUS,
    GoBuild(
        STACK_SRC / "go" / "promtool",
        ("github.com/prometheus/prometheus/cmd/promtool",),
        ldflags=tuple(stamp_flags(_promtool_stamps())),
        tags=("remove_all_sd",),
    ),
)
# Prometheus's relabel package, to apply the chart's PodMonitor relabelings in tests.
RELABEL = go_artifact("relabel", versions.PROMETHEUS, GoBuild(STACK_SRC / "go" / "relabel", (".",)))
ARTIFACTS: tuple[Artifact, ...] = (HELM, PROMTOOL, RELABEL)
SERVERS: tuple[Server, ...] = ()


def helm(layout: Layout) -> Path:
    return HELM.path(layout) / "bin" / "helm"


def promtool(layout: Layout) -> Path:
    return PROMTOOL.path(layout) / "bin" / "promtool"


def relabel(layout: Layout) -> Path:
    return RELABEL.path(layout) / "bin" / "relabel"
