"""Builders shared by artifacts: Maven dependency copies and Go module builds.

Both run the ordinary clients (``mvn``, ``go``) against the registries this machine
reaches; their own caches (``~/.m2``, the Go module and build caches) make a rebuild
after a version bump cheap.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sluice_dev.artifacts import Artifact
from sluice_dev.paths import REPO_ROOT

STACK_SRC = REPO_ROOT / "stack"


class BuildError(RuntimeError):
    """A provisioning step failed; the message names the step and its output."""


def run(argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] = {}) -> None:
    proc = subprocess.run(
        list(argv),
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise BuildError(f"{' '.join(argv)} failed with exit {proc.returncode}:\n{tail}")


def maven_copy(pom: Path, target: Path, properties: Mapping[str, str]) -> None:
    """Copy the runtime dependencies of ``pom`` (and their transitive ones) into
    ``target``; ``properties`` fill the pom's ``${...}`` placeholders."""
    target.mkdir(parents=True, exist_ok=True)
    defines = [f"-D{key}={value}" for key, value in properties.items()]
    run(
        [
            "mvn",
            "-B",
            "-q",
            "-f",
            str(pom),
            *defines,
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={target}",
        ]
    )


@functools.cache
def go_version() -> str:
    """The Go toolchain's version (``go1.26.8``): part of every Go build's cache key."""
    proc = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(f"go env GOVERSION failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


# Like upstream release builds: static binaries (no cgo) without a symbol table or
# DWARF, paths trimmed, no VCS stamp (the module cache has no repository).
GO_ENV: Mapping[str, str] = {"CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}


@dataclass(frozen=True)
class GoBuild:
    """``go build`` of ``packages`` of the private module at ``module``.

    The module's own go.mod/go.sum pin every dependency; ``-mod=mod`` lets a cold
    machine download them from the module proxy. ``ldflags`` add to ``-s -w``
    (typically ``-X pkg.var=value`` version stamps); ``tags`` are build tags.
    """

    module: Path
    packages: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def argv(self, bin_dir: Path) -> list[str]:
        argv = ["go", "build", "-mod=mod", "-trimpath"]
        argv.append("-ldflags=" + " ".join(["-s", "-w", *self.ldflags]))
        if self.tags:
            argv.append("-tags=" + ",".join(self.tags))
        return [*argv, "-o", f"{bin_dir}/", *self.packages]

    def settings(self) -> tuple[str, ...]:
        """What decides the binaries besides the module's files: the cache key."""
        env = [f"{key}={value}" for key, value in sorted(GO_ENV.items())]
        return (go_version(), *env, *self.argv(Path("bin")))

    def download(self) -> None:
        """Fetch every module the build needs, so it overlaps with other builds."""
        run(["go", "mod", "download"], cwd=self.module, env=GO_ENV)

    def __call__(self, target: Path) -> None:
        bin_dir = target / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        run(self.argv(bin_dir), cwd=self.module, env=GO_ENV)


def go_artifact(name: str, version: str, build: GoBuild, *, on_demand: bool = False) -> Artifact:
    """An artifact built by ``build``, keyed by the module's files and the settings."""
    return Artifact(
        name,
        version,
        build,
        recipe=go_recipe(build.module),
        settings=build.settings,
        prefetch=build.download,
        compiles=True,
        on_demand=on_demand,
    )


def go_recipe(module: Path) -> tuple[Path, ...]:
    """The files that decide what a Go module builds: go.mod, go.sum, its sources."""
    return tuple(sorted([module / "go.mod", module / "go.sum", *module.glob("*.go")]))
