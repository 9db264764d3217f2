"""Prometheus as a process of the stack: the server the chart's monitors configure.

Built from the Prometheus module promtool is built from (``versions.PROMETHEUS``),
with service discovery reduced to Kubernetes: upstream's ``remove_all_sd`` tag leaves
out every optional discovery plugin (``plugins/plugin_*.go``, the cloud SDKs) and
``enable_kubernetes_sd`` puts the Kubernetes one back (README, "Service discovery
plugins"); file, HTTP and static discovery always stay. Without upstream's
``builtinassets`` tag the web UI is served from ``web/ui/static`` under the working
directory, which does not exist here: the UI's pages answer 500 ("Error opening React
index.html"), while the HTTP API (``/api/v1/...``), ``/-/ready``, ``/-/reload`` and
``/metrics`` are unaffected; that is all the stack uses.

Its configuration is not written here: it starts on a minimal one, and the
``monitoring`` process (:mod:`sluice_dev.monitoring.reloader`) replaces it with what
the Prometheus Operator generates and asks for ``/-/reload``. Optional: it starts
only when named (``sluice-dev up monitoring``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sluice_dev import ports, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, GoBuild, go_artifact
from sluice_dev.monitoring import promconfig
from sluice_dev.paths import Layout
from sluice_dev.probes import http_ok
from sluice_dev.servers.base import Server
from sluice_dev.servers.kube import write_if_changed
from sluice_dev.servers.tools import prometheus_release, stamp_flags

NAME: Final = "prometheus"
URL: Final = f"http://{ports.HOST}:{ports.PROMETHEUS}"
SD_TAGS: Final = ("remove_all_sd", "enable_kubernetes_sd")


def _stamps() -> dict[str, str]:
    return {
        "github.com/prometheus/common/version.Version": prometheus_release(),
        "github.com/prometheus/common/version.Branch": "HEAD",
    }


ARTIFACT = go_artifact(
    NAME,
    versions.PROMETHEUS,
    GoBuild(
        STACK_SRC / "go" / "prometheus",
        ("github.com/prometheus/prometheus/cmd/prometheus",),
        ldflags=tuple(stamp_flags(_stamps())),
        tags=SD_TAGS,
    ),
)
ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)


def binary(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / "bin" / "prometheus"


def conf_dir(layout: Layout) -> Path:
    return layout.conf(NAME)


def config_file(layout: Layout) -> Path:
    return conf_dir(layout) / "prometheus.yaml"


def rules_dir(layout: Layout) -> Path:
    """Where the rule ConfigMaps' files go: the Prometheus pod's ``/etc/prometheus/rules``."""
    return conf_dir(layout) / "rules"


def _prepare(layout: Layout) -> None:
    """A minimal configuration until the operator's arrives (kept if one is there)."""
    if not config_file(layout).exists():
        write_if_changed(config_file(layout), promconfig.INITIAL)
    layout.data(NAME).mkdir(parents=True, exist_ok=True)


def _argv(layout: Layout) -> Sequence[str]:
    return [
        str(binary(layout)),
        f"--config.file={config_file(layout)}",
        f"--storage.tsdb.path={layout.data(NAME)}",
        "--storage.tsdb.retention.time=2d",
        f"--web.listen-address={ports.HOST}:{ports.PROMETHEUS}",
        # POST /-/reload: the config reloader's way in, as in the operator's pods.
        "--web.enable-lifecycle",
        "--log.level=info",
    ]


def _probe(_layout: Layout) -> str | None:
    return http_ok(f"{URL}/-/ready")


def _exports(_layout: Layout) -> dict[str, str]:
    return {"SLUICE_PROMETHEUS_URL": URL}


SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        artifacts=(NAME,),
        prepare=_prepare,
        exports=_exports,
        start_timeout=60.0,
        stop_grace=15.0,
        optional=True,
    ),
)
