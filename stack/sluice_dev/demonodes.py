"""Where the demo's pods run, and how it loses a node there.

``make demo`` runs the driver on real nodes: the pinned kubelet with containerd and
runc (:mod:`sluice_dev.realnode`), in the stack's network namespace, running the job
image ``make images`` built. ``make demo-agent`` runs it on the node agent, which
starts the driver as a process of the machine (no image, no container). The demo asks
both the same things: start the stack, give it the job image as ``v1`` and ``v2``,
lose the driver's node while the driver keeps running there (a zombie, which the
fence must stop), and bring the node back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from sluice_dev import localcluster, netns, stack
from sluice_dev.nodeagent import control
from sluice_dev.oci import images as oci_images
from sluice_dev.paths import Layout
from sluice_dev.realnode import images, plan
from sluice_dev.realnode.servers import kube_proxy_name, kubelet_name
from sluice_dev.servers import cassandra, etcd, kafka, kube

Say = Callable[[str], None]


class Nodes(Protocol):
    what: str
    """The nodes, as the demo's steps name them."""
    image: str
    """The job image's name, without its tag."""
    events: int
    """Events the demo produces by default (at 200/s): enough that production goes on
    until the upgrade's standby has taken over, so the handover gap is measured."""

    def up(self, layout: Layout, say: Say) -> None: ...

    def images(self, layout: Layout, versions: Sequence[str]) -> list[str]: ...

    def lose(self, layout: Layout, node: str) -> str: ...

    def heal(self, layout: Layout, node: str) -> None: ...

    def shell(self, layout: Layout) -> str: ...


class RealNodes:
    """Two workers, each a kubelet, a containerd and a kube-proxy of the stack; no
    node agent, so every pod of the demo runs in a container."""

    what = "real nodes (kubelet, containerd, runc)"
    image = "localhost/sluice-demo/job"
    events = 60_000
    """A container's Spark starts more slowly (its CPU limit, a driver beside it)."""

    def up(self, layout: Layout, say: Say) -> None:
        """Kubernetes, Kafka, Cassandra and the workers (no node agent, no Datastore or
        Pub/Sub server: the demo does not use them)."""
        servers = (*etcd.SERVERS, *kube.SERVERS, *kafka.SERVERS, *cassandra.SERVERS)
        workers = (kube_proxy_name(index) for index in plan.WORKERS)
        stack.up(layout, [*(server.name for server in servers), *workers], say)

    def images(self, layout: Layout, versions: Sequence[str]) -> list[str]:
        """The job image under ``image:v1``, ``image:v2`` on every worker (one image,
        loaded once per worker, tagged twice: the upgrade changes the reference the
        pipeline names, which is what a code upgrade changes)."""
        references = [f"{self.image}:{version}" for version in versions]
        for worker in plan.workers(layout):
            images.load_as(layout, worker, oci_images.JOB.dev, references)
        return references

    def lose(self, layout: Layout, node: str) -> str:
        stack.stop(layout, kubelet_name(_index(layout, node)))
        return "its kubelet stopped: heartbeats stop, its driver's container keeps running"

    def heal(self, layout: Layout, node: str) -> None:
        """The kubelet back: it finds the zombie's pod deleted and kills its container."""
        stack.up(layout, [kubelet_name(_index(layout, node))], say=lambda _line: None)

    def shell(self, layout: Layout) -> str:
        """How a user's shell reaches the stack: commands run in its namespace."""
        return f"SLUICE_NETNS=1 SLUICE_STACK_DIR={layout.stack} .venv/bin/sluice-dev exec --"


class AgentNodes:
    """The node agent's nodes: pods are processes of the machine, images are
    directories of code (:func:`localcluster.register_job_images`)."""

    what = "the node agent"
    image = "sluice-demo/job"
    events = 36_000

    def up(self, layout: Layout, say: Say) -> None:
        stack.up(layout, say=say)

    def images(self, layout: Layout, versions: Sequence[str]) -> list[str]:
        return localcluster.register_job_images(layout, self.image, versions)

    def lose(self, layout: Layout, node: str) -> str:
        control.partition(layout, node)
        return "partitioned: heartbeats stop, its driver keeps running"

    def heal(self, layout: Layout, node: str) -> None:
        control.heal(layout, node)

    def shell(self, layout: Layout) -> str:
        return f"SLUICE_STACK_DIR={layout.stack} .venv/bin/sluice-dev exec --"


def for_stack() -> Nodes:
    """Real nodes when the stack runs in its namespace (``SLUICE_NETNS=1``, as ``make
    demo`` runs it), else the node agent."""
    return RealNodes() if netns.ENABLED else AgentNodes()


def _index(layout: Layout, node: str) -> int:
    for worker in plan.workers(layout):
        if worker.name == node:
            return worker.index
    raise stack.StackError(f"{node} is not a real node of this stack")
