"""The end-to-end job images (``tests/e2e/images``) built as real images FROM the job
image, for pods of real nodes, and given to every worker."""

from __future__ import annotations

from collections.abc import Sequence

from sluice_dev.oci import images
from sluice_dev.oci.podman import Podman
from sluice_dev.paths import Layout
from sluice_dev.realnode import images as node_images
from sluice_dev.realnode.plan import Worker
from tests.support.e2e import IMAGES_ROOT
from tests.support.fixtures import REAL_JOB_IMAGE


def recipe(version: str) -> images.Recipe:
    return images.Recipe(
        f"e2e-job-{version}",
        IMAGES_ROOT / "Dockerfile",
        IMAGES_ROOT / version,
        args={"JOB_IMAGE": REAL_JOB_IMAGE},
    )


def e2e_image(layout: Layout, workers: Sequence[Worker], version: str) -> str:
    """The image of ``version`` (v1, v2, broken), built unless cached, on every worker:
    its exact reference (``localhost/sluice/e2e-job-VERSION:src-KEY``)."""
    built = images.build(Podman.for_layout(layout), recipe(version), say=lambda _line: None)
    for worker in workers:
        node_images.load(layout, worker, built.image)
    return built.image
