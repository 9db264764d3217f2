"""Dockerfile.job and Dockerfile.operator built with podman, cached by what goes into them.

A build's key is the hash of its Dockerfile, every file the Dockerfile copies from
the context, and the ids of the base images it is given: the same key means the
same image, so a second ``make images`` with nothing changed is a lookup. An image
is tagged ``localhost/sluice/NAME:src-KEY`` (that exact build) and
``localhost/sluice/NAME:dev`` (the newest); older ``src-`` tags past the newest
three are removed, and podman's layer cache makes a change to the code alone
rebuild only the layers after the dependencies.

The build runs on the machine's network (podman sets none up) and sees the
machine's CA bundle, read-only, where the Dockerfile's PIP_CERT and UV_NATIVE_TLS
look for it: the package indexes are reached through a TLS proxy here.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sluice_dev.oci import bases
from sluice_dev.oci.dockerfile import parse
from sluice_dev.oci.podman import Podman
from sluice_dev.paths import REPO_ROOT

CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
KEEP = 3
SKIPPED = ("__pycache__", ".pyc", ".egg-info", ".mypy_cache", ".pytest_cache")


@dataclass(frozen=True)
class Recipe:
    """One image: its Dockerfile, its context, its bases by build argument."""

    name: str
    dockerfile: Path
    context: Path = REPO_ROOT
    bases: Mapping[str, bases.Base] = field(default_factory=dict)
    args: Mapping[str, str] = field(default_factory=dict)
    """Other build arguments, such as the image a derived image starts FROM."""

    @property
    def repository(self) -> str:
        return f"localhost/sluice/{self.name}"

    @property
    def dev(self) -> str:
        """The moving tag of the last build: what real nodes and the demo run."""
        return f"{self.repository}:dev"


JOB = Recipe(
    "job",
    REPO_ROOT / "Dockerfile.job",
    bases={"PYTHON_IMAGE": bases.PYTHON, "JRE_IMAGE": bases.JRE},
)
OPERATOR = Recipe(
    "operator", REPO_ROOT / "Dockerfile.operator", bases={"PYTHON_IMAGE": bases.PYTHON}
)
RECIPES = (JOB, OPERATOR)


@dataclass(frozen=True)
class Built:
    recipe: Recipe
    image: str
    image_id: str
    cached: bool
    seconds: float

    @property
    def dev(self) -> str:
        return self.recipe.dev

    def line(self, size: int) -> str:
        how = "cached" if self.cached else f"built in {self.seconds:.0f} s"
        return f"{self.image} ({size / 1e6:,.0f} MB, {how})"


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for child in sorted(path.rglob("*")):
        if child.is_file() and not any(s in part for part in child.parts for s in SKIPPED):
            yield child


def key(recipe: Recipe, base_ids: Mapping[str, str]) -> str:
    """The hash of the Dockerfile, the files it copies from the context, and its bases
    and other build arguments (an image's id where the argument names one)."""
    digest = hashlib.sha256(recipe.dockerfile.read_bytes())
    for source in parse(recipe.dockerfile).context_sources():
        for file in _files(recipe.context / source):
            digest.update(str(file.relative_to(recipe.context)).encode() + b"\0")
            digest.update(file.read_bytes())
    for arg in sorted(base_ids):
        digest.update(f"{arg}={base_ids[arg]}".encode())
    return digest.hexdigest()[:12]


def build(
    podman: Podman,
    recipe: Recipe,
    *,
    say: Callable[[str], None] = print,
    refresh_bases: bool = False,
) -> Built:
    """The image of ``recipe``, built unless an image of the same key is there."""
    began = time.monotonic()
    base_images = {}
    for arg, base in recipe.bases.items():
        made = bases.ensure(podman, base, refresh=refresh_bases)
        if not made.cached:
            say(made.line())
        base_images[arg] = made.image
    ids = {
        arg: podman.image_id(image) or image
        for arg, image in {**base_images, **recipe.args}.items()
    }
    image = f"{recipe.repository}:src-{key(recipe, ids)}"
    found = podman.image_id(image)
    cached = found is not None
    if found is None:
        volumes = ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"] if CA_BUNDLE.exists() else []
        podman.run(
            [
                "build",
                "--network=host",
                "--layers",
                "--pull=never",
                *volumes,
                *(
                    a
                    for arg, value in {**base_images, **recipe.args}.items()
                    for a in ("--build-arg", f"{arg}={value}")
                ),
                "--file",
                str(recipe.dockerfile),
                "--tag",
                image,
                str(recipe.context),
            ],
            timeout=3600,
        )
        found = podman.image_id(image)
        assert found is not None, f"podman build left no image {image}"
    podman.tag(image, f"{recipe.repository}:dev")
    _prune(podman, recipe)
    return Built(recipe, image, found, cached, time.monotonic() - began)


def _prune(podman: Podman, recipe: Recipe) -> None:
    """Keep the newest KEEP ``src-`` images of the recipe; drop dangling layers."""
    listing = podman.run(
        [
            "images",
            "--filter",
            f"reference={recipe.repository}",
            "--format",
            "{{.Tag}} {{.CreatedAt}}",
        ]
    ).stdout.splitlines()
    tagged = sorted(
        (line.split(" ", 1) for line in listing if line.startswith("src-")),
        key=lambda pair: pair[1],
        reverse=True,
    )
    old = [f"{recipe.repository}:{tag}" for tag, _ in tagged[KEEP:]]
    if old:
        podman.run(["rmi", *old], check=False)
    podman.run(["image", "prune", "--force"], check=False)
