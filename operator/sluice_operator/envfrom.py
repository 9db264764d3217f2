"""No key of an ``envFrom`` ConfigMap or Secret may become a reserved variable.

``spark.pod.envFrom`` puts every key of a ConfigMap or Secret (with the entry's
``prefix`` before it) into the driver's and the executors' environment. The CRD
refuses a reserved name in ``spark.pod.env`` and a prefix that could make one, but
the keys are not in the manifest: a ConfigMap with the key ``SLUICE_SPARK_JARS``
would become ``spark.jars`` in the driver, ``JAVA_TOOL_OPTIONS`` a ``-javaagent:``,
``LD_PRELOAD`` or ``PYTHONPATH`` code the image does not hold
(``sluice_api.pod.RESERVED_ENV_PREFIXES``). So before a driver pod is created the
operator reads the key names of every object ``envFrom`` names, and one whose keys
make a reserved name, or that does not exist (the kubelet would read it once it
appears, unchecked), keeps the pod from being created: the ``EnvironmentAllowed``
condition and a ``ReservedEnvironment`` Event name the field, the object and the
keys, and the pipeline starts by itself once the object is fixed.

Only key names are used: a ConfigMap's ``data`` and ``binaryData`` keys, a Secret's
``data`` keys (``kube.Kube.env_keys``; the API server offers no form of a Secret with
its key names but not its values, so it is read whole and only the names are kept).
An object changed after the pod was created is not checked again; the driver keeps
only the ``SLUICE_SPARK_*`` variables the operator listed (``sluice_job.spark_env``).

:func:`sources` and :func:`refusals` are pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from sluice_api.pod import RESERVED_ENV_TEXT, reserved_keys
from sluice_api.spec import PipelineSpec

CONDITION: Final = "EnvironmentAllowed"
REASON: Final = "ReservedName"
EVENT: Final = "ReservedEnvironment"


class Kind(StrEnum):
    CONFIG_MAP = "ConfigMap"
    SECRET = "Secret"


@dataclass(frozen=True)
class Source:
    """One ``envFrom`` entry: the object it names and the prefix of its keys."""

    kind: Kind
    name: str
    prefix: str | None
    where: str
    """The spec field, as a user writes it (``spark.pod.envFrom[0]``)."""


def sources(spec: PipelineSpec) -> tuple[Source, ...]:
    """Every ``envFrom`` entry of the spec, in spec order."""
    found = []
    for i, entry in enumerate(spec.spark.pod.env_from):
        where = f"spark.pod.envFrom[{i}]"
        if entry.config_map_ref is not None:
            found.append(Source(Kind.CONFIG_MAP, entry.config_map_ref.name, entry.prefix, where))
        if entry.secret_ref is not None:
            found.append(Source(Kind.SECRET, entry.secret_ref.name, entry.prefix, where))
    return tuple(found)


def refusals(
    named: tuple[Source, ...], keys: Mapping[tuple[Kind, str], tuple[str, ...] | None]
) -> tuple[str, ...]:
    """Why each source may not be used, one line each (a pure function). ``keys`` maps
    each object to its key names, ``None`` if it does not exist."""
    said = []
    for source in named:
        found = keys.get((source.kind, source.name))
        object_ = f"{source.kind} {source.name!r} ({source.where})"
        if found is None:
            said.append(
                f"{object_} does not exist: the kubelet would read its keys once it appears, "
                "unchecked; create it, without keys that make a reserved variable"
            )
            continue
        reserved = reserved_keys(found, source.prefix)
        if reserved:
            made = ", ".join(
                key if not source.prefix else f"{key} (as {source.prefix}{key})" for key in reserved
            )
            said.append(
                f"{object_} has the key {made}, a variable pods may not take from it: "
                f"reserved are {RESERVED_ENV_TEXT}; remove or rename the key"
            )
    return tuple(said)
