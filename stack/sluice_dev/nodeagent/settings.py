"""What one agent process is configured with, and the base environment of its pods.

A container's environment starts from a small, explicit part of the agent's own
environment (not all of it: a pod should not inherit the agent's kubeconfig or test
variables by accident): ``PATH`` with the agent's venv ``bin`` first, locale, ``HOME``,
``JAVA_HOME`` (PySpark needs it), ``VIRTUAL_ENV``, Spark's own JVM options for
``spark-submit`` and its launcher (``SPARK_SUBMIT_OPTS``, ``SPARK_LAUNCHER_OPTS``: the
test suite sets them, see ``tests/conftest.py``), every ``SLUICE_*`` variable (the
``SLUICE_STACK`` marker above all, so ``sluice-dev down`` finds pod processes), and
whatever ``--pass-env`` names.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sluice_dev.nodeagent.images import ImageMap

PASSED = (
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "SPARK_SUBMIT_OPTS",
    "SPARK_LAUNCHER_OPTS",
)


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    images: ImageMap
    base_env: Mapping[str, str]
    default_entrypoint: tuple[str, ...] = ()
    """The ENTRYPOINT of images whose code root names none (``--default-entrypoint``)."""
    taints: tuple[Mapping[str, str], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    heartbeat_seconds: float = 2.0
    poll_seconds: float = 0.25

    def pod_dir(self, namespace: str, name: str, uid: str) -> Path:
        return self.state_dir / "pods" / f"{namespace}_{name}_{uid}"


def base_env(environ: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The part of ``environ`` every container inherits (see the module docstring)."""
    names = {*PASSED, *extra, *(k for k in environ if k.startswith("SLUICE_"))}
    env = {k: environ[k] for k in names if k in environ}
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in environ.get("PATH", os.defpath).split(os.pathsep) if p and p != venv_bin]
    env["PATH"] = os.pathsep.join([venv_bin, *path])
    return env
