"""The node agent as a server of the local stack: the kubelet of two nodes,
``sluice-node-a`` and ``sluice-node-b`` (see :mod:`sluice_dev.nodeagent`).

It authenticates as the stack's node-agent identity (``sluice:node-agent``, bound to
the kubelet's ClusterRole ``system:node`` by :mod:`sluice_dev.servers.kube`), keeps
pod files under ``data/node-agent/pods`` and reads its image map from
``conf/node-agent/images.json``, which starts as ``{"*": null}``: any image runs, with
no code root. :func:`register_image` maps an image to a code root while the agent
runs (the file is re-read at every container start). Every image of the local stack
stands for the job image or one built from it, so an image that names no entrypoint
of its own (an ``image.entrypoint`` file in its code root) runs the job image's,
:data:`JOB_ENTRYPOINT`, as Spark's executor pods (``args`` only) expect. Its fault
switches listen on ``127.0.0.1:NODE_AGENT`` (:mod:`sluice_dev.nodeagent.control`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from sluice_dev import ports
from sluice_dev.artifacts import Artifact
from sluice_dev.nodeagent import control, images
from sluice_dev.paths import Layout
from sluice_dev.servers import kube
from sluice_dev.servers.base import Server

NAME = "node-agent"
NODES = ("sluice-node-a", "sluice-node-b")
JOB_ENTRYPOINT = ("python", "-m", "sluice_job")
"""The ENTRYPOINT of ``Dockerfile.job``."""


def default_entrypoint_flag() -> str:
    """The agent's flag that gives images without their own the job's entrypoint."""
    return f"--default-entrypoint={json.dumps(list(JOB_ENTRYPOINT))}"


def state_dir(layout: Layout) -> Path:
    return layout.data(NAME)


def images_file(layout: Layout) -> Path:
    return layout.conf(NAME) / "images.json"


def register_image(layout: Layout, image: str, code_root: Path | None) -> None:
    """Let pods of ``image`` run the code under ``code_root`` (``None``: no code root)."""
    images.register(images_file(layout), image, code_root)


def prepare_images(layout: Layout) -> None:
    """The image file as the agent starts with it: ``{"*": null}`` unless it exists."""
    if not images_file(layout).exists():
        register_image(layout, images.WILDCARD, None)


def _prepare(layout: Layout) -> None:
    state_dir(layout).mkdir(parents=True, exist_ok=True)
    prepare_images(layout)


def _argv(layout: Layout) -> Sequence[str]:
    return [
        sys.executable,
        "-m",
        "sluice_dev.nodeagent",
        f"--kubeconfig={kube.node_agent_kubeconfig(layout)}",
        f"--nodes={','.join(NODES)}",
        f"--control-port={ports.NODE_AGENT}",
        f"--state-dir={state_dir(layout)}",
        f"--images={images_file(layout)}",
        default_entrypoint_flag(),
    ]


def _probe(layout: Layout) -> str | None:
    """Healthy when the control server answers and every node is Ready in the API."""
    problem = control.healthy(ports.NODE_AGENT)
    if problem:
        return problem
    for node in NODES:
        problem = kube.node_problem(layout, node)
        if problem:
            return problem
    return None


ARTIFACTS: tuple[Artifact, ...] = ()
SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=_argv,
        probe=_probe,
        requires=(kube.APISERVER,),
        prepare=_prepare,
        start_timeout=60.0,
        stop_grace=15.0,
    ),
)
