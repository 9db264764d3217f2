"""Builders shared by artifacts: Maven dependency copies and Go module builds.

Both run the ordinary clients (``mvn``, ``go``) against the registries this machine
reaches; their own caches (``~/.m2``, the Go module and build caches) make a rebuild
after a version bump cheap.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
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
class Placeholder:
    """A file a dependency's release build generates and its module zip lacks (a web
    UI's compiled assets, say), added to that dependency's sources for our build only.

    ``go build -overlay`` refuses files under GOMODCACHE ("Files beneath GOMODCACHE
    must not be replaced"), and the cache is read-only anyway, so the build copies
    the dependency out of the cache into the artifact's staging directory, adds the
    file there and builds a copy of the private module with a ``replace`` pointing at
    that copy (``go mod edit``; the committed go.mod is untouched)."""

    module: str
    """The dependency's module path, as its go.mod names it."""
    path: str
    """The file's path inside the module."""
    data: bytes


@dataclass(frozen=True)
class ModuleFiles:
    """Files shipped in a dependency's module (its CRDs, say), copied from the module
    cache into the artifact's ``into`` directory after the build."""

    module: str
    pattern: str
    """A glob inside the module's directory (``example/crds/*.yaml``)."""
    into: str


@dataclass(frozen=True)
class GoBuild:
    """``go build`` of ``packages`` of the private module at ``module``.

    The module's own go.mod/go.sum pin every dependency; ``-mod=mod`` lets a cold
    machine download them from the module proxy. ``ldflags`` add to ``-s -w``
    (typically ``-X pkg.var=value`` version stamps); ``tags`` are build tags;
    ``placeholders`` are added to dependencies' sources and ``copies`` taken from
    them (see each class).
    """

    module: Path
    packages: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    placeholders: tuple[Placeholder, ...] = ()
    copies: tuple[ModuleFiles, ...] = ()

    def argv(self, bin_dir: Path) -> list[str]:
        argv = ["go", "build", "-mod=mod", "-trimpath"]
        argv.append("-ldflags=" + " ".join(["-s", "-w", *self.ldflags]))
        if self.tags:
            argv.append("-tags=" + ",".join(self.tags))
        return [*argv, "-o", f"{bin_dir}/", *self.packages]

    def settings(self) -> tuple[str, ...]:
        """What decides the binaries besides the module's files: the cache key."""
        env = [f"{key}={value}" for key, value in sorted(GO_ENV.items())]
        added = [
            f"placeholder {p.module}/{p.path} {hashlib.sha256(p.data).hexdigest()}"
            for p in self.placeholders
        ]
        copied = [f"copy {c.module}/{c.pattern} -> {c.into}" for c in self.copies]
        return (go_version(), *env, *self.argv(Path("bin")), *added, *copied)

    def download(self) -> None:
        """Fetch every module the build needs, so it overlaps with other builds."""
        run(["go", "mod", "download"], cwd=self.module, env=GO_ENV)

    def module_dir(self, module: str) -> Path:
        """Where the module cache holds ``module`` at the version this build requires."""
        argv = ["go", "list", "-mod=mod", "-m", "-f", "{{.Dir}}", module]
        proc = subprocess.run(
            argv,
            cwd=self.module,
            env={**os.environ, **GO_ENV},
            capture_output=True,
            text=True,
            check=False,
        )
        found = proc.stdout.strip()
        if proc.returncode != 0 or not found:
            raise BuildError(f"{' '.join(argv)} in {self.module} failed: {proc.stderr.strip()}")
        return Path(found)

    def __call__(self, target: Path) -> None:
        bin_dir = target / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        if self.placeholders:
            tree = target / "src"
            run(self.argv(bin_dir), cwd=self._with_placeholders(tree), env=GO_ENV)
            shutil.rmtree(tree)
        else:
            run(self.argv(bin_dir), cwd=self.module, env=GO_ENV)
        for files in self.copies:
            self._copy(files, target / files.into)

    def _with_placeholders(self, tree: Path) -> Path:
        """A copy of the private module in ``tree`` whose go.mod replaces each
        dependency that has placeholders by a writable copy of it holding them."""
        tree.mkdir(parents=True)
        for path in go_recipe(self.module):
            shutil.copyfile(path, tree / path.name)
        for module in sorted({p.module for p in self.placeholders}):
            copy = tree / "replaced" / module.replace("/", "_")
            shutil.copytree(self.module_dir(module), copy, copy_function=shutil.copyfile)
            for directory in (copy, *(d for d in copy.rglob("*") if d.is_dir())):
                directory.chmod(0o755)  # the module cache's directories are read-only
            for placeholder in (p for p in self.placeholders if p.module == module):
                (copy / placeholder.path).parent.mkdir(parents=True, exist_ok=True)
                (copy / placeholder.path).write_bytes(placeholder.data)
            relative = copy.relative_to(tree)
            run(["go", "mod", "edit", f"-replace={module}=./{relative}"], cwd=tree, env=GO_ENV)
        return tree

    def _copy(self, files: ModuleFiles, into: Path) -> None:
        found = sorted(self.module_dir(files.module).glob(files.pattern))
        if not found:
            raise BuildError(f"no {files.pattern} in {files.module} (module cache)")
        into.mkdir(parents=True, exist_ok=True)
        for path in found:
            shutil.copyfile(path, into / path.name)  # copyfile: not the cache's read-only mode


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
