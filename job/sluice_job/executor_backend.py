"""The job image's second role: a Spark executor in a pod that Spark started.

When ``spark.executors.instances`` > 0, the driver's Spark (its Kubernetes scheduler
backend) creates executor pods from the driver's own image with the single argument
``executor`` and describes the executor in environment variables. Spark's own image
entrypoint (``entrypoint.sh`` of Spark's Kubernetes Dockerfile) turns them into a JVM
command running ``KubernetesExecutorBackend``; the job image's entrypoint is
``python -m sluice_job``, so this module does the same, from the same variables:

* ``SPARK_JAVA_OPT_<n>`` in numeric order (the executor's JVM options: the module
  options Java 17 needs, ``spark.executor.extraJavaOptions``, start-up settings),
* ``-Xms``/``-Xmx`` ``SPARK_EXECUTOR_MEMORY``,
* class path: ``SPARK_CONF_DIR``, Spark's jars (the pinned pyspark's ``jars``),
  ``SPARK_CLASSPATH`` (``spark.executor.extraClassPath``), ``SPARK_EXTRA_CLASSPATH``,
* ``--driver-url``, ``--executor-id``, ``--cores``, ``--app-id``, ``--hostname``
  (the pod's IP), ``--resourceProfileId`` and ``--podName`` from their variables.

The Kafka connector jars reach the executor from the driver (``spark.jars``), and its
Python workers run the interpreter the driver names (``spark.pyspark.python``: the
image's), so they import the same packages, the user's transform among them.
Spark's RPC secret, which the operator gives the pod as a secretKeyRef, goes to the
file the JVM's options name (:mod:`sluice_job.spark_auth`), not to its environment.
:func:`command` is pure; :func:`run` replaces this process with the JVM, so the pod's
process is the executor and Kubernetes' signals reach it directly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, NoReturn

from sluice_job import spark_auth

ROLE: Final = "executor"
"""The argument Spark's executor pods pass to the image's entrypoint."""

BACKEND: Final = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"

REQUIRED: Final = (
    ("SPARK_DRIVER_URL", "--driver-url"),
    ("SPARK_EXECUTOR_ID", "--executor-id"),
    ("SPARK_EXECUTOR_CORES", "--cores"),
    ("SPARK_APPLICATION_ID", "--app-id"),
    ("SPARK_EXECUTOR_POD_IP", "--hostname"),
)
"""Variables Spark's scheduler always sets, and the backend's option for each."""

_JAVA_OPT: Final = re.compile(r"SPARK_JAVA_OPT_(\d+)")


class ExecutorEnvError(Exception):
    """The pod lacks a variable Spark's scheduler sets: not started by Spark."""


def command(env: Mapping[str, str], spark_home: Path) -> list[str]:
    """The executor JVM's argv, as Spark's image entrypoint builds it from ``env``."""
    missing = [name for name, _ in REQUIRED if not env.get(name)]
    if missing:
        raise ExecutorEnvError(
            f"the executor role needs {', '.join(missing)}: these are set by Spark's "
            "Kubernetes scheduler when it starts an executor pod; run the driver with "
            "no argument"
        )
    java_home = env.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else "java"
    options = sorted(
        (
            (int(match[1]), value)
            for name, value in env.items()
            if (match := _JAVA_OPT.fullmatch(name))
        ),
    )
    argv = [
        java,
        *(value for _, value in options),
        *spark_auth.executor_options([value for _, value in options], env),
    ]
    memory = env.get("SPARK_EXECUTOR_MEMORY")
    if memory:
        argv += [f"-Xms{memory}", f"-Xmx{memory}"]
    argv += ["-cp", class_path(env, spark_home), BACKEND]
    for name, option in REQUIRED:
        argv += [option, env[name]]
    argv += ["--resourceProfileId", env.get("SPARK_RESOURCE_PROFILE_ID") or "0"]
    pod_name = env.get("SPARK_EXECUTOR_POD_NAME")
    if pod_name:
        argv += ["--podName", pod_name]
    return argv


def class_path(env: Mapping[str, str], spark_home: Path) -> str:
    parts: Sequence[str | None] = (
        env.get("SPARK_CONF_DIR"),
        str(spark_home / "jars" / "*"),
        env.get("SPARK_CLASSPATH"),
        env.get("SPARK_EXTRA_CLASSPATH"),
        env.get("SPARK_DIST_CLASSPATH"),
    )
    return os.pathsep.join(part for part in parts if part)


def spark_home(env: Mapping[str, str]) -> Path:
    """``SPARK_HOME`` if set, else the installed pyspark (which ships Spark's jars)."""
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).parent


def run(env: Mapping[str, str]) -> NoReturn:
    """Become the executor JVM (``exec``): its exit code is the pod's."""
    argv = command(env, spark_home(env))
    os.execvpe(argv[0], argv, spark_auth.write_for_executor(env, argv))
