"""Where the stack keeps its cached artifacts and its running state.

Two directories, both overridable: the *cache* (``SLUICE_CACHE``, default
``~/.cache/sluice``) holds downloads and builds keyed by version and survives
``down``; the *stack directory* (``SLUICE_STACK_DIR``, default ``<repo>/.stack``)
holds configuration, data, logs and pid files of the running servers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Layout:
    """The directories of one local stack."""

    cache: Path
    stack: Path

    @classmethod
    def from_env(cls) -> Layout:
        cache = Path(os.environ.get("SLUICE_CACHE", Path.home() / ".cache" / "sluice"))
        stack = Path(os.environ.get("SLUICE_STACK_DIR", REPO_ROOT / ".stack"))
        return cls(cache=cache.resolve(), stack=stack.resolve())

    def artifact(self, name: str, version: str) -> Path:
        return self.cache / f"{name}-{version}"

    def log(self, server: str) -> Path:
        return self.stack / "logs" / f"{server}.log"

    def pidfile(self, server: str) -> Path:
        return self.stack / "run" / f"{server}.pid"

    def data(self, server: str) -> Path:
        return self.stack / "data" / server

    def conf(self, server: str) -> Path:
        return self.stack / "conf" / server

    @property
    def kubeconfig(self) -> Path:
        return self.stack / "kubeconfig"
