"""Spark's RPC secret from the pipeline's Secret, in a file, never in a pod spec.

With executors, driver and executors authenticate each other (``spark.authenticate``)
with a shared secret. Left alone, Spark makes one per application and puts it in
every executor pod's environment (``_SPARK_AUTH_SECRET``), where anyone who may read
pods in the namespace, another pipeline's driver included, can read it. Spark takes
the secret from a file instead when ``spark.authenticate.secret.file`` is set (the
driver's and the executors' own settings fall back to it), and then adds nothing to
the executor pods. It must be that one setting: an executor's first connection, to
fetch the driver's settings (``KubernetesExecutorBackend``'s props fetcher), reads
only it. The operator gives both containers the secret as a secretKeyRef
(``SLUICE_SPARK_AUTH_SECRET``, only a reference in the pod spec); the driver
(:func:`driver_conf`) and the executor role (:func:`write_for_executor`) write it to
that file, under the pod's scratch directory, named after the driver's pipeline and
epoch (on a node agent without mount namespaces, pods of other pipelines share
``/tmp``), written whole (a rename) and readable by its owner only.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from sluice_api import env as names

FILE_KEY: Final = "spark.authenticate.secret.file"
SCRATCH: Final = Path("/tmp")
_OPTION: Final = re.compile(rf"-D{re.escape(FILE_KEY)}=(.+)")


def secret_file(env: Mapping[str, str], scratch: Path = SCRATCH) -> Path:
    """Where the driver of ``env`` and its executors keep the secret (one path for both:
    Spark hands the setting to the executors as it is)."""
    name = f"{env[names.NAMESPACE]}-{env[names.PIPELINE]}-{env[names.EPOCH]}"
    return scratch / f"sluice-spark-auth-{name}" / "secret"


def driver_conf(env: Mapping[str, str], scratch: Path = SCRATCH) -> dict[str, str]:
    """The driver's setting naming the secret's file, which it writes; nothing
    without a secret (local mode, or an operator that sets none)."""
    secret = env.get(names.SPARK_AUTH_SECRET)
    if not secret:
        return {}
    path = secret_file(env, scratch)
    write(path, secret)
    return {FILE_KEY: str(path)}


def executor_file(java_options: Sequence[str]) -> Path | None:
    """The file the executor's JVM will read the secret from (its start-up option)."""
    for option in java_options:
        if match := _OPTION.fullmatch(option):
            return Path(match[1])
    return None


def executor_options(java_options: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """What the executor's JVM needs beyond Spark's options to read the file: Spark
    reads a secret file only when ``spark.master`` says Kubernetes, and an executor's
    first connection (the props fetcher) has only its start-up options, which never
    hold the master (Spark's executor ConfigMap would, and the operator turns it off).
    So the master of the pod's own cluster, as the driver names it."""
    if executor_file(java_options) is None or any(
        option.startswith("-Dspark.master=") for option in java_options
    ):
        return []
    host = env.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
    port = env.get("KUBERNETES_SERVICE_PORT", "443")
    return [f"-Dspark.master=k8s://https://{host}:{port}"]


def write_for_executor(env: Mapping[str, str], java_options: Sequence[str]) -> dict[str, str]:
    """Write the secret where the executor's JVM will read it; returns the environment
    to run the JVM with, without the secret."""
    secret = env.get(names.SPARK_AUTH_SECRET)
    path = executor_file(java_options)
    if secret and path is not None:
        write(path, secret)
    return {k: v for k, v in env.items() if k != names.SPARK_AUTH_SECRET}


def write(path: Path, secret: str) -> None:
    """``secret`` in ``path``, whole or not at all, mode 0600."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".secret-")
    try:
        os.write(handle, secret.encode())
        os.fchmod(handle, 0o600)
    finally:
        os.close(handle)
    os.replace(temporary, path)
