"""Only the operator's ``SLUICE_SPARK_*`` variables become Spark configuration.

The driver turns ``SLUICE_SPARK_*`` variables into Spark settings (``spark``,
``spark_auth``): the master, settings the operator decides, jars. A pipeline's
``spark.pod.envFrom`` puts every key of a ConfigMap or Secret into the container's
environment, so a key ``SLUICE_SPARK_JARS`` or ``SLUICE_SPARK_CONF`` would go around
the ``spark.conf`` allowlist. The operator refuses such a source before it creates
the pod (``sluice_operator.envfrom``), but a ConfigMap can change between that check
and the container's start; so the driver also keeps only the names the operator lists
in ``SLUICE_OPERATOR_SPARK_ENV`` (set in ``env``, which wins over ``envFrom``) and
the image's own (``sluice_api.env.IMAGE_SPARK_ENV``). A driver started without that
variable (by hand, by tests, by the benchmark) keeps every one.

:func:`ignored` is pure; :func:`drop_ignored` changes the process environment, before
anything reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping

from sluice_api import env as names
from sluice_job import logs


def ignored(env: Mapping[str, str]) -> tuple[str, ...]:
    """The ``SLUICE_SPARK_*`` names in ``env`` the operator did not set, sorted (a pure
    function); none when ``env`` has no operator's list (not started by the operator)."""
    listed = env.get(names.OPERATOR_SPARK_ENV)
    if listed is None:
        return ()
    trusted = {name.strip() for name in listed.split(",")} | set(names.IMAGE_SPARK_ENV)
    return tuple(
        sorted(name for name in env if name.startswith(names.SPARK_PREFIX) and name not in trusted)
    )


def drop_ignored(environ: MutableMapping[str, str]) -> tuple[str, ...]:
    """Remove the :func:`ignored` variables from ``environ`` (the process's, so Spark's
    JVM does not inherit them either), logging one line naming each (never its value)."""
    dropped = ignored(environ)
    for name in dropped:
        del environ[name]
        logs.event(
            "ignored environment variable",
            level=logging.WARNING,
            variable=name,
            why=f"not set by the operator (not listed in {names.OPERATOR_SPARK_ENV})",
        )
    return dropped
