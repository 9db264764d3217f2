"""``sluice-dev image build DIR --tag NAME:TAG``: a derived job image for the local node
agent, built the way ``examples/custom-transform/Dockerfile`` builds the real one.

The Dockerfile starts ``FROM`` the job image and installs the user's package, without
dependencies, into the job's virtualenv. Here the job image is the stack's own
virtualenv (the node agent runs ``python -m sluice_job`` with it), so the build
installs the package alone (``uv pip install --no-deps --target``) from a copy of DIR
(the build context: DIR itself is left as it was) into a fresh directory of the stack,
``<stack>/images/<name>/<tag>/<build>``, writes the job image's environment there
(``image.env``: where Spark's Kafka jars are) and registers ``NAME:TAG`` -> that
directory in the node agent's image file. The agent prepends the directory to the
``PYTHONPATH`` of the pod's processes, the driver and Spark's Python workers alike, so
they import exactly the built code and nothing from DIR.

Nothing is installed that a hash does not vouch for: the package's dependencies are
not installed at all (the job image provides them), and its build backend must be
pinned with hashes in build-constraints.txt (``--require-build-hashes``; the
example's setuptools is), or the build fails naming what is missing.

Rebuilding a tag builds a new directory and then switches the registration to it in
one atomic replacement of the image file: a pod started from the previous build keeps
its directory (the previous build is kept, older ones are removed).

:func:`parse_reference`, :func:`build_root`, :func:`stale_builds` and
:func:`image_env_text` are purely computational; :func:`build` performs the steps.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from sluice_dev.nodeagent.podspec import IMAGE_ENV_FILE
from sluice_dev.paths import Layout
from sluice_dev.pins import BUILD_CONSTRAINTS

KEEP_BUILDS: Final = 2
"""Builds kept per tag: the registered one and the one before (a pod may still run it)."""
JOB_PACKAGES: Final = frozenset({"sluice_job", "sluice_api", "pyspark"})
"""What the job image provides: a user's image that brings its own would shadow it."""
CONTEXT_IGNORED: Final = (
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "__pycache__",
    "*.egg-info",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
)
"""Not copied into the build context (what a ``.dockerignore`` usually lists)."""
UV_TARGET_LOCK: Final = ".lock"
UV: Final = Path(sys.executable).parent / "uv"
"""The environment's uv (``make setup`` installs it by hash from requirements-uv.txt)."""

_HOST: Final = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*(?::[0-9]+)?/)"
_PATH: Final = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_REFERENCE: Final = re.compile(rf"^(?P<name>{_HOST}?{_PATH})(?::(?P<tag>[\w][\w.-]{{0,127}}))?$")


class ImageBuildError(RuntimeError):
    """The image cannot be built; the message says what to change."""


@dataclass(frozen=True)
class ImageRef:
    name: str
    tag: str

    def __str__(self) -> str:
        return f"{self.name}:{self.tag}"


@dataclass(frozen=True)
class Built:
    ref: ImageRef
    directory: Path
    packages: tuple[str, ...]
    """The top-level modules the image adds (the user's packages)."""


def parse_reference(text: str) -> ImageRef:
    """``NAME[:TAG]`` as Docker spells it (``registry:5000/team/app:1.0``); the tag
    defaults to ``latest``. A digest (``@sha256:``) names an image, it cannot tag one."""
    found = _REFERENCE.match(text)
    if found is None or len(found["name"]) > 255:
        raise ImageBuildError(
            f"--tag {text!r} is not an image name: expected NAME:TAG, e.g. clickscore:0.1.0 "
            "(lower-case name components separated by '/', a tag of letters, digits, '_', "
            "'.' or '-', at most 128)"
        )
    return ImageRef(found["name"], found["tag"] or "latest")


def build_root(layout: Layout, ref: ImageRef) -> Path:
    """Where the builds of ``ref`` live: ``<stack>/images/<name>/<tag>`` (a registry's
    port is spelt ``_``, so the path has no ``:``, which PYTHONPATH uses as separator)."""
    return layout.stack / "images" / ref.name.replace(":", "_") / ref.tag


def build_id(now: datetime, token: str) -> str:
    """A build's directory name; names sort in the order of the builds."""
    return f"{now.astimezone(UTC).strftime('%Y%m%dT%H%M%S%fZ')}-{token}"


def stale_builds(builds: Sequence[str], keep: int = KEEP_BUILDS) -> list[str]:
    """The builds to remove: all but the ``keep`` newest (names from :func:`build_id`)."""
    ordered = sorted(b for b in builds if not b.startswith("."))
    return ordered[: max(0, len(ordered) - keep)]


def image_env_text(env: Mapping[str, str]) -> str:
    """The job image's own environment for the node agent (``Dockerfile.job``'s
    ``ENV``: ``servers.spark.job_image_env``, what the stack provisioned), one
    ``NAME=value`` line each."""
    header = "# The job image's ENV (Dockerfile.job), written by sluice-dev."
    return "".join(f"{line}\n" for line in (header, *(f"{k}={v}" for k, v in env.items())))


def top_level_modules(directory: Path) -> tuple[str, ...]:
    """The importable names a ``pip install --target`` directory holds."""
    names = set()
    for entry in directory.iterdir():
        if entry.name.endswith((".dist-info", ".egg-info")) or entry.name in {
            IMAGE_ENV_FILE,
            "bin",
            "__pycache__",
        }:
            continue
        if entry.is_dir() or entry.suffix in {".py", ".so", ".pth"}:
            names.add(entry.name.split(".", 1)[0] if entry.is_file() else entry.name)
    return tuple(sorted(names))


def check_source(source: Path) -> None:
    if not source.is_dir():
        raise ImageBuildError(f"{source} is not a directory: give the directory of your package")
    if not (source / "pyproject.toml").is_file():
        raise ImageBuildError(
            f"{source} has no pyproject.toml: an image build installs a Python package "
            "(see examples/custom-transform/pyproject.toml)"
        )


def build(
    layout: Layout,
    source: Path,
    ref: ImageRef,
    image_env: Mapping[str, str],
    say: Callable[[str], None] = lambda _line: None,
) -> Built:
    """Install the package in ``source`` as image ``ref`` and register it."""
    from sluice_dev.servers import nodeagent

    check_source(source)
    root = build_root(layout, ref)
    root.mkdir(parents=True, exist_ok=True)
    name = build_id(datetime.now(UTC), uuid.uuid4().hex[:6])
    staging = root / f".{name}.tmp"
    try:
        say(f"installing {source} (uv pip install --no-deps) into {root / name}")
        _install(source, staging)
        packages = top_level_modules(staging)
        _check_packages(packages, source)
        (staging / IMAGE_ENV_FILE).write_text(image_env_text(image_env))
        staging.rename(root / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    nodeagent.prepare_images(layout)
    nodeagent.register_image(layout, str(ref), root / name)
    for stale in stale_builds([p.name for p in root.iterdir()]):
        shutil.rmtree(root / stale, ignore_errors=True)
    return Built(ref, root / name, packages)


def _install(source: Path, target: Path) -> None:
    """``uv pip install --no-deps --target`` from a copy of ``source``: the build runs
    in the tree it is given (``build/``, ``*.egg-info``), and the user's tree stays
    clean. The build backend is installed only if build-constraints.txt pins it by hash."""
    with tempfile.TemporaryDirectory(prefix="sluice-image-") as scratch:
        context = Path(scratch) / "context"
        shutil.copytree(source, context, ignore=shutil.ignore_patterns(*CONTEXT_IGNORED))
        argv = [
            *(str(UV), "pip", "install", "--quiet", "--python", sys.executable),
            *("--no-deps", "--target", str(target)),
            *("--build-constraints", str(BUILD_CONSTRAINTS), "--require-build-hashes"),
            str(context),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise ImageBuildError(install_failure(source, done.returncode, tail))
    # uv's lock of the target directory during the install: not part of the image.
    (target / UV_TARGET_LOCK).unlink(missing_ok=True)


def install_failure(source: Path, code: int, tail: str) -> str:
    """What a failed install tells the user: for a build backend without a pinned
    hash, which file pins them and how to add it."""
    if "no trusted hash" in tail:
        return (
            f"{source}: its build backend is not pinned by hash in build-constraints.txt, "
            "and a build installs nothing unchecked: add it to the `constraints` rule of "
            f"the Makefile and run `make constraints`.\n{tail}"
        )
    return f"uv could not install {source} (exit {code}):\n{tail}"


def _check_packages(packages: Sequence[str], source: Path) -> None:
    if not packages:
        raise ImageBuildError(f"{source} installs no Python module: check its package settings")
    shadowing = sorted(JOB_PACKAGES.intersection(packages))
    if shadowing:
        raise ImageBuildError(
            f"{source} installs {', '.join(shadowing)}, which the job image provides: "
            "remove it from the package (its version is pinned by the job image)"
        )
