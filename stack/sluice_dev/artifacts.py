"""What ``sluice-dev provision`` produces: versioned, cached downloads and builds.

An artifact lives in ``<cache>/<name>-<version>-<recipe hash>/`` and is complete when
the file ``.complete`` exists there; a half-finished build is redone, a complete one
is never touched again. The recipe hash covers the files the build reads (a pom, a
go.mod and go.sum) and the build's own settings (for a Go build: the Go version, the
build flags and tags), so changing any of them builds afresh instead of reusing a
stale copy.

The cache is shared by every clone on the machine (a CI rehearsal beside a working
copy), so ``ensure`` holds an exclusive lock on ``<artifact dir>.lock`` while it checks
and builds: a second provisioner of the same artifact waits and then finds it built,
instead of deleting the first one's half-finished directory.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sluice_dev.filelock import locked
from sluice_dev.paths import Layout

COMPLETE = ".complete"


def _no_settings() -> Sequence[str]:
    return ()


@dataclass(frozen=True)
class Artifact:
    """One cached thing the stack needs, built by ``build(target_dir)``."""

    name: str
    version: str
    build: Callable[[Path], None]
    recipe: tuple[Path, ...] = ()
    """Files the build reads; their content is part of the cache key."""
    settings: Callable[[], Sequence[str]] = _no_settings
    """The build's settings (toolchain version, flags); part of the cache key."""
    prefetch: Callable[[], None] | None = None
    """Downloads the build needs, run ahead of it and beside other builds."""
    compiles: bool = False
    """Whether the build is CPU-bound (a compiler), so it takes a build slot."""
    on_demand: bool = False
    """Built when a server that needs it starts (or when named), not by a plain
    ``provision``: what only real nodes need, which ``make test`` does not start."""

    def path(self, layout: Layout) -> Path:
        return layout.artifact(self.name, f"{self.version}-{self.recipe_hash()}")

    def recipe_hash(self) -> str:
        digest = hashlib.sha256()
        for path in self.recipe:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        for setting in self.settings():
            digest.update(b"\0" + setting.encode())
        return digest.hexdigest()[:10]

    def ready(self, layout: Layout) -> bool:
        return (self.path(layout) / COMPLETE).exists()


@dataclass(frozen=True)
class Outcome:
    artifact: Artifact
    cached: bool
    seconds: float

    def line(self) -> str:
        how = "cached" if self.cached else "built"
        return f"{self.artifact.name:<24} {self.artifact.version:<10} {how:<7} {self.seconds:7.1f}s"


def ensure(artifact: Artifact, layout: Layout) -> Outcome:
    """Build ``artifact`` unless a complete copy is cached; idempotent, and safe to
    call from several processes at once (one builds, the others wait for it)."""
    started = time.monotonic()
    if artifact.ready(layout):
        return Outcome(artifact, cached=True, seconds=time.monotonic() - started)
    with locked(artifact.path(layout)):
        if artifact.ready(layout):  # another provisioner built it while we waited
            return Outcome(artifact, cached=True, seconds=time.monotonic() - started)
        _build(artifact, artifact.path(layout))
    return Outcome(artifact, cached=False, seconds=time.monotonic() - started)


def _build(artifact: Artifact, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    staging = target.with_name(target.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    artifact.build(staging)
    (staging / COMPLETE).write_text(f"{artifact.name} {artifact.version}\n")
    staging.rename(target)
