"""Images built by ``make images`` given to a real node's containerd.

No registry is reachable here, so a worker cannot pull: the image is saved from the
build's podman store as an OCI archive (once per image id, kept in the cache) and
imported into the worker's containerd, under the same name (again when that name
now stands for another build: the worker's image is compared by digest). A pod then names it
with ``imagePullPolicy: IfNotPresent`` or ``Never``, as a cluster with pre-loaded
images (kind's ``kind load``) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sluice_dev.oci.podman import Podman
from sluice_dev.paths import Layout
from sluice_dev.realnode import runtime
from sluice_dev.realnode.plan import Worker


def archive(layout: Layout, image: str) -> Path:
    """The OCI archive of ``image`` (built by ``make images``), saved once per id."""
    podman = Podman.for_layout(layout)
    image_id = podman.image_id(image)
    if image_id is None:
        raise runtime.NodeError(f"no image {image} in the build's store: run `make images`")
    target = layout.cache / "oci-archives" / f"{image_id[:16]}.tar"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        podman.run(["save", "--format", "oci-archive", "-o", str(partial), image], timeout=900)
        partial.rename(target)
    return target


def load(layout: Layout, node: Worker, image: str) -> bool:
    """Give ``node`` the image ``image``; whether it had to be imported."""
    return runtime.load(node, image, archive(layout, image))


def load_as(layout: Layout, node: Worker, image: str, aliases: Sequence[str]) -> None:
    """Give ``node`` the image ``image`` under each of ``aliases`` too (``ctr images
    tag``: one image, several names, as a registry serves one digest under two tags)."""
    load(layout, node, image)
    runtime.tag(node, image, aliases)
