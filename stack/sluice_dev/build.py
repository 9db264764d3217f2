"""Builders shared by artifacts: Maven dependency copies and Go module builds.

Both run the ordinary clients (``mvn``, ``go``) against the registries this machine
reaches; their own caches (``~/.m2``, the Go module and build caches) make a rebuild
after a version bump cheap.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

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


def go_build(
    module: Path, packages: Sequence[str], bin_dir: Path, *, ldflags: Sequence[str] = ()
) -> None:
    """Build ``packages`` of the Go module at ``module`` into ``bin_dir``, stripped;
    ``ldflags`` add to ``-s -w`` (typically ``-X pkg.var=value`` version stamps).

    The module's own go.mod/go.sum pin every dependency; ``-mod=mod`` lets a cold
    machine download them from the module proxy.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    run(
        [
            "go",
            "build",
            "-mod=mod",
            "-trimpath",
            "-ldflags=" + " ".join(["-s", "-w", *ldflags]),
            "-o",
            f"{bin_dir}/",
            *packages,
        ],
        cwd=module,
        env={"GOFLAGS": "-buildvcs=false"},
    )


def go_recipe(module: Path) -> tuple[Path, ...]:
    """The files that decide what a Go module builds: go.mod, go.sum, its sources."""
    return tuple(sorted([module / "go.mod", module / "go.sum", *module.glob("*.go")]))
