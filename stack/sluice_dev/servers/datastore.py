"""The Datastore v1 API server (:mod:`sluice_dev.datastore`) as a server of the stack.

Google's emulator cannot be installed here, so the stack runs the project's own:
gRPC on ``127.0.0.1:DATASTORE``, the HTTP fault switches and counters on
``DATASTORE_CONTROL``. Clients find it through ``DATASTORE_EMULATOR_HOST``, exactly
as they would find Google's emulator. Data lives in memory only: a restart forgets
it, and tests use a project of their own.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Final

from sluice_dev import ports, probes
from sluice_dev.artifacts import Artifact
from sluice_dev.datastore import remote
from sluice_dev.paths import Layout
from sluice_dev.servers.base import Server

NAME: Final = "datastore"
HOST: Final = f"{ports.HOST}:{ports.DATASTORE}"
PROJECT: Final = "sluice-dev"
"""The default project of ``sluice-dev env`` (any project name works)."""


def _argv(_layout: Layout) -> Sequence[str]:
    return [
        sys.executable,
        "-m",
        "sluice_dev.datastore",
        f"--port={ports.DATASTORE}",
        f"--control-port={ports.DATASTORE_CONTROL}",
    ]


def _probe(_layout: Layout) -> str | None:
    """Healthy when the gRPC port accepts connections and the control port answers."""
    return probes.tcp_open(ports.HOST, ports.DATASTORE) or remote.healthy(ports.DATASTORE_CONTROL)


def _exports(_layout: Layout) -> Mapping[str, str]:
    return {"DATASTORE_EMULATOR_HOST": HOST, "DATASTORE_PROJECT_ID": PROJECT}


ARTIFACTS: tuple[Artifact, ...] = ()
SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        exports=_exports,
        start_timeout=30.0,
        stop_grace=5.0,
    ),
)
