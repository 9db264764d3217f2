"""Google's in-memory Pub/Sub server, ``pstest``, as a server of the stack.

``pstest`` ships in the Go module ``cloud.google.com/go/pubsub/v2``: it is the
vendor's own fake, kept in step with the ``google.pubsub.v1`` API (publish, pull,
streaming pull, ack deadlines and redelivery on expiry, nacks, dead-letter
topics, ordering, filters, exactly-once delivery, seek). ``stack/go/pubsub`` wraps
it in a small ``main`` with runtime fault switches (drop acks, drop lease
extensions, expire every lease now, unavailable, a method failing with a code)
and counters, per project, over HTTP on ``PUBSUB_CONTROL``
(:mod:`sluice_dev.pubsub.remote` flips them).

Clients find it through ``PUBSUB_EMULATOR_HOST``, exactly as they would find
Google's emulator. Messages live in memory only: a restart forgets them, and
tests use a project of their own. It is part of the default stack: it starts in
well under a second and holds nothing until used, so ``make demo`` does not
notice it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from sluice_dev import ports, probes, versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import STACK_SRC, GoBuild, go_artifact
from sluice_dev.paths import Layout
from sluice_dev.pubsub import remote
from sluice_dev.servers.base import Server

NAME: Final = "pubsub"
HOST: Final = f"{ports.HOST}:{ports.PUBSUB}"
PROJECT: Final = "sluice-dev"
"""The default project of ``sluice-dev env`` (any project name works)."""

ARTIFACT = go_artifact(NAME, versions.PUBSUB_GO, GoBuild(STACK_SRC / "go" / "pubsub", (".",)))
ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT,)


def binary(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / "bin" / "pubsub-server"


def _argv(layout: Layout) -> Sequence[str]:
    return [
        str(binary(layout)),
        f"-host={ports.HOST}",
        f"-port={ports.PUBSUB}",
        f"-control-port={ports.PUBSUB_CONTROL}",
    ]


def _probe(_layout: Layout) -> str | None:
    """Healthy when the gRPC port accepts connections and the control port answers."""
    return probes.tcp_open(ports.HOST, ports.PUBSUB) or remote.healthy(ports.PUBSUB_CONTROL)


def _exports(_layout: Layout) -> Mapping[str, str]:
    return {"PUBSUB_EMULATOR_HOST": HOST, "PUBSUB_PROJECT_ID": PROJECT}


SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        artifacts=(NAME,),
        exports=_exports,
        start_timeout=30.0,
        stop_grace=5.0,
    ),
)
