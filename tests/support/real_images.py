"""The end-to-end job images (``tests/e2e/images``) built as real images FROM the job
image, for pods of real nodes, and given to every worker."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sluice_dev.localcluster import PSA_ENFORCE
from sluice_dev.oci import images
from sluice_dev.oci.podman import Podman
from sluice_dev.paths import Layout
from sluice_dev.realnode import images as node_images
from sluice_dev.realnode import runtime
from sluice_dev.realnode.plan import Worker
from tests.support.clickscore import EXAMPLE
from tests.support.e2e import IMAGES_ROOT
from tests.support.fixtures import REAL_JOB_IMAGE


def recipe(version: str) -> images.Recipe:
    return images.Recipe(
        f"e2e-job-{version}",
        IMAGES_ROOT / "Dockerfile",
        IMAGES_ROOT / version,
        args={"JOB_IMAGE": REAL_JOB_IMAGE},
    )


CLICKSCORE = images.Recipe(
    "clickscore",
    EXAMPLE / "Dockerfile",
    EXAMPLE,
    bases={"PYTHON_IMAGE": images.bases.PYTHON},
    args={"JOB_IMAGE": REAL_JOB_IMAGE},
)
"""The custom-transform example's image, built by its own Dockerfile FROM the job image."""


def derived() -> tuple[images.Recipe, ...]:
    """Every image the real-node tests build FROM the job image."""
    return (recipe("v1"), recipe("v2"), CLICKSCORE)


def main() -> None:
    """Build :func:`derived` on the machine's network, before a session enters the
    stack's namespace (``make test-node``): the example's build fetches its build
    backend from the package index, which nothing in that namespace reaches. In the
    session each build is then found by its key."""
    podman = Podman.for_layout(Layout.from_env())
    for wanted in derived():
        built = images.build(podman, wanted, say=print)
        how = "cached" if built.cached else f"built in {built.seconds:.0f} s"
        print(f"{built.image} ({how})", flush=True)


def on_workers(layout: Layout, workers: Sequence[Worker], recipe: images.Recipe) -> str:
    """The image of ``recipe``, built unless cached, loaded into every worker: its exact
    reference (``localhost/sluice/NAME:src-KEY``)."""
    built = images.build(Podman.for_layout(layout), recipe, say=lambda _line: None)
    for worker in workers:
        node_images.load(layout, worker, built.image)
    return built.image


def e2e_image(layout: Layout, workers: Sequence[Worker], version: str) -> str:
    """The image of ``version`` (v1, v2, broken) on every worker."""
    return on_workers(layout, workers, recipe(version))


def worker_of(workers: Sequence[Worker], pod: Any) -> Worker:
    """The worker ``pod`` runs on."""
    return next(w for w in workers if w.name == pod.spec.node_name)


def on_pod_network(workers: Sequence[Worker], pod: Any) -> bool:
    """``pod`` has an address of its worker's pod range (its own, not the node's)."""
    prefix = worker_of(workers, pod).pod_cidr.rsplit(".", 1)[0] + "."
    return str(pod.status.pod_ip).startswith(prefix)


def kill_container(workers: Sequence[Worker], pod: Any) -> Worker:
    """SIGKILL every process of the pod's (first) container, as an OOM kill or a crash
    would, found in its worker's cgroups; that worker."""
    worker = worker_of(workers, pod)
    container_id = pod.status.container_statuses[0].container_id.split("//")[-1]
    pids = runtime.container_pids(worker, pod.metadata.uid, container_id)
    assert pids, f"the processes of {pod.metadata.name} are in its container's cgroup"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return worker


def enforce_restricted(core: Any, namespace: str) -> None:
    """The API server's Pod Security admission enforcing ``restricted`` on
    ``namespace``: every pod the product creates there (drivers, standbys, Spark's
    executors, the chart's operator) is checked before a kubelet runs it."""
    core.patch_namespace(namespace, {"metadata": {"labels": {PSA_ENFORCE: "restricted"}}})


REAL_NODES = {"sluice.dev/node": "real"}
"""The node label of real workers, which a pipeline's driver selects."""
PLACEMENT_POLICY = "--allowed-node-labels=sluice.dev/node"
"""What the operator must allow for that selector (``sluice_operator.podpolicy``)."""

PARTITIONS = 2
"""The partitions of a real-node test's topic."""


@dataclass(frozen=True)
class RealPlace:
    """Where a real-node test's pipeline reads and writes (the ``real_place`` fixture):
    a fresh topic of :data:`PARTITIONS` partitions, and the test's keyspace holding
    the events table."""

    bootstrap: str
    topic: str
    contact: str
    keyspace: str

    def spec(self, image: str, entrypoint: str, *, cap: int) -> dict[str, Any]:
        """A StreamingPipeline spec for real workers: ``image`` and ``entrypoint`` into
        the events table, checkpointed beside it, batches of ``cap`` per partition."""
        return {
            "image": image,
            "source": {
                "kafka": {
                    "bootstrapServers": self.bootstrap,
                    "topics": [self.topic],
                    "maxRecordsPerPartition": cap,
                }
            },
            "transform": {"entrypoint": entrypoint},
            "sink": {
                "cassandra": {
                    "contactPoints": [self.contact],
                    "keyspace": self.keyspace,
                    "table": "events",
                }
            },
            "checkpoint": {
                "cassandra": {"contactPoints": [self.contact], "keyspace": self.keyspace}
            },
            "trigger": {"intervalSeconds": 1},
            "spark": {"driver": {"cores": 1, "memory": "1g", "nodeSelector": REAL_NODES}},
            "upgrade": {"stopTimeoutSeconds": 120},
            "restart": {"backoffSeconds": 1, "maxBackoffSeconds": 4, "maxFailures": 10},
        }


if __name__ == "__main__":
    main()
