"""Alertmanager as a process of the stack: where Prometheus sends the Sluice alerts,
and where tests read them (``GET /api/v2/alerts``).

Built from ``github.com/prometheus/alertmanager`` at a pinned release. Its web UI is
compiled by upstream's release build (``make``, with npm) into ``ui/app/dist``, which
``ui/web.go`` embeds (``//go:embed app/dist``) and which the module zip does not ship,
so a plain ``go build`` stops at "pattern app/dist: no matching files found". The
build adds one placeholder page there instead, in a copy of the module taken out of
the module cache (:class:`sluice_dev.build.Placeholder`): the UI's routes serve it,
the API is unaffected.

One instance, no cluster (``--cluster.listen-address=`` empty turns the gossip mesh
off), and a route without receivers: alerts are kept and shown by the API, and
notified to no one. Optional: it starts only when named (``sluice-dev up
monitoring``).
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import yaml

from sluice_dev import ports, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, GoBuild, Placeholder, go_artifact
from sluice_dev.paths import Layout
from sluice_dev.probes import http_ok
from sluice_dev.servers.base import Server
from sluice_dev.servers.kube import write_if_changed
from sluice_dev.servers.tools import stamp_flags

NAME: Final = "alertmanager"
MODULE: Final = "github.com/prometheus/alertmanager"
ADDRESS: Final = f"{ports.HOST}:{ports.ALERTMANAGER}"
URL: Final = f"http://{ADDRESS}"

UI_PLACEHOLDER: Final = b"""\
<!doctype html>
<title>Alertmanager</title>
<p>This Alertmanager of the Sluice local stack is built without its web UI (the
module zip does not ship <code>ui/app/dist</code>). Its API is at
<a href="api/v2/alerts">api/v2/alerts</a>.</p>
"""

ARTIFACT = go_artifact(
    NAME,
    versions.ALERTMANAGER,
    GoBuild(
        STACK_SRC / "go" / "alertmanager",
        (f"{MODULE}/cmd/alertmanager",),
        ldflags=tuple(
            stamp_flags(
                {
                    "github.com/prometheus/common/version.Version": versions.ALERTMANAGER,
                    "github.com/prometheus/common/version.Branch": "HEAD",
                }
            )
        ),
        # ui/web.go serves a page only compressed (index.html.gz): mtime 0 keeps the
        # bytes, and so the artifact's cache key, the same from build to build.
        placeholders=tuple(
            Placeholder(
                MODULE, f"ui/app/dist/{ui}/index.html.gz", gzip.compress(UI_PLACEHOLDER, mtime=0)
            )
            for ui in ("elm", "mantine")
        ),
    ),
)
ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)

RECEIVER: Final = "nobody"


def config() -> dict[str, object]:
    """A route that groups quickly and notifies no one: the API holds the alerts."""
    return {
        "route": {
            "receiver": RECEIVER,
            "group_by": ["alertname", "namespace", "pipeline"],
            "group_wait": "1s",
            "group_interval": "5s",
            "repeat_interval": "1h",
        },
        "receivers": [{"name": RECEIVER}],
    }


def binary(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / "bin" / "alertmanager"


def config_file(layout: Layout) -> Path:
    return layout.conf(NAME) / "alertmanager.yaml"


def _prepare(layout: Layout) -> None:
    write_if_changed(config_file(layout), yaml.safe_dump(config(), sort_keys=False))
    layout.data(NAME).mkdir(parents=True, exist_ok=True)


def _argv(layout: Layout) -> Sequence[str]:
    return [
        str(binary(layout)),
        f"--config.file={config_file(layout)}",
        f"--storage.path={layout.data(NAME)}",
        f"--web.listen-address={ADDRESS}",
        "--cluster.listen-address=",
        "--log.level=info",
    ]


def _probe(_layout: Layout) -> str | None:
    return http_ok(f"{URL}/-/ready")


def _exports(_layout: Layout) -> dict[str, str]:
    return {"SLUICE_ALERTMANAGER_URL": URL}


SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        artifacts=(NAME,),
        prepare=_prepare,
        exports=_exports,
        start_timeout=60.0,
        stop_grace=10.0,
        optional=True,
    ),
)
