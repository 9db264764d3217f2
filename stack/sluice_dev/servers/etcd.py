"""etcd, the store behind the local kube-apiserver.

Debian ships etcd 3.4, too old for the consistent reads from cache that Kubernetes 1.34
expects, so the stack builds a pinned 3.6 release from the tiny Go module in
``stack/go/etcd`` (its ``main.go`` only calls ``etcdmain.Main``). The server listens on
loopback only and runs with ``--unsafe-no-fsync``: the data is disposable test state,
and fsync on every write would make the API server slow on ordinary disks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sluice_dev import ports, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, GoBuild, go_artifact
from sluice_dev.paths import Layout
from sluice_dev.probes import http_ok
from sluice_dev.servers.base import Server

NAME = "etcd"
MODULE = STACK_SRC / "go" / "etcd"

CLIENT_URL = f"http://{ports.HOST}:{ports.ETCD_CLIENT}"
PEER_URL = f"http://{ports.HOST}:{ports.ETCD_PEER}"


ARTIFACT = go_artifact(NAME, versions.ETCD, GoBuild(MODULE, (".",)))
ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)


def binary(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / "bin" / "etcd"


def _argv(layout: Layout) -> Sequence[str]:
    return [
        str(binary(layout)),
        "--name=sluice",
        f"--data-dir={layout.data(NAME)}",
        f"--listen-client-urls={CLIENT_URL}",
        f"--advertise-client-urls={CLIENT_URL}",
        f"--listen-peer-urls={PEER_URL}",
        f"--initial-advertise-peer-urls={PEER_URL}",
        f"--initial-cluster=sluice={PEER_URL}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def _prepare(layout: Layout) -> None:
    data = layout.data(NAME)
    data.mkdir(parents=True, exist_ok=True)
    data.chmod(0o700)  # etcd refuses (warns about) a data dir readable by others


def _probe(_layout: Layout) -> str | None:
    return http_ok(f"{CLIENT_URL}/health")


SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        artifacts=(NAME,),
        prepare=_prepare,
        exports=lambda _layout: {"ETCD_ENDPOINTS": CLIENT_URL},
        start_timeout=60.0,
        stop_grace=10.0,
    ),
)
