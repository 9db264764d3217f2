"""The driver's configuration: the pipeline spec plus who this driver is.

The operator passes the spec as JSON in ``SLUICE_CONFIG`` and the identity in
``SLUICE_PIPELINE``, ``SLUICE_NAMESPACE``, ``SLUICE_CLUSTER_ID`` and ``SLUICE_EPOCH``;
``--config FILE`` replaces ``SLUICE_CONFIG`` for local runs. Anything wrong raises
:class:`ConfigError` whose message names the field, and the driver exits 2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from sluice_api import cluster
from sluice_api import env as names
from sluice_api.spec import PipelineSpec
from sluice_api.validation import describe

NICENESS: Final = 10
"""The niceness of the driver's Spark JVM unless ``SLUICE_SPARK_NICENESS`` says
otherwise (0: the driver's own priority); why in ``sluice_job.spark``."""
MAX_NICENESS: Final = 19
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ConfigError(ValueError):
    """Invalid configuration; the message names the field and what is wrong."""


@dataclass(frozen=True)
class DriverConfig:
    pipeline: str
    namespace: str
    cluster_id: str
    """The cluster the operator runs in (``sluice_api.cluster``)."""
    epoch: int
    spec: PipelineSpec
    code_version: str
    termination_log: Path
    metrics_port: int | None
    options: Mapping[str, Any] = field(default_factory=dict)
    """The transform's options: ``transform.options`` and those from Secrets."""
    metrics_host: str = ""
    """The address metrics are served on: the pod's own (``POD_IP``, which the
    operator sets), not every address; empty (outside a pod): every address."""
    standby: bool = False
    """Started as a standby (``SLUICE_STANDBY``): the new spec's of a warm handover
    (``1``: get ready, then claim once the previous driver released the pipeline) or
    a hot one (``hot``, :attr:`hot`)."""
    hot: bool = False
    """A hot standby (``SLUICE_STANDBY=hot``, ``spec.standby: 1``): get ready, keep
    warm, claim only when the operator promotes it (``hot_standby``)."""
    control_port: int | None = None
    """Where a standby takes its promotion (``SLUICE_CONTROL_PORT``)."""
    spark_niceness: int = NICENESS
    """The niceness Spark's JVM starts at (``SLUICE_SPARK_NICENESS``, ``sluice_job.spark``)."""

    @property
    def pipeline_id(self) -> str:
        """The pipeline in its cluster, ``namespace/name``: the ``pipeline`` label of
        its metrics and the header of its dead letters (unchanged by cluster ids)."""
        return f"{self.namespace}/{self.pipeline}"

    @property
    def checkpoint_key(self) -> str:
        """The key of its checkpoint rows: unique per pipeline across clusters."""
        return cluster.checkpoint_key(self.cluster_id, self.namespace, self.pipeline)

    @property
    def legacy_checkpoint_key(self) -> str:
        """The key drivers used before cluster ids, adopted once (``checkpoint``)."""
        return cluster.legacy_checkpoint_key(self.namespace, self.pipeline)


def load(env: Mapping[str, str], config_file: Path | None = None) -> DriverConfig:
    """Parse the driver's configuration from ``env`` (and ``config_file``)."""
    raw = _read_spec(env, config_file)
    try:
        spec = PipelineSpec.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(describe(err)) from None
    hot = env.get(names.STANDBY, "") == names.STANDBY_HOT
    if hot and not env.get(names.CONTROL_PORT):
        raise ConfigError(
            f"{names.STANDBY}={names.STANDBY_HOT}: a hot standby needs {names.CONTROL_PORT}, "
            "where the operator promotes it"
        )
    return DriverConfig(
        pipeline=_name(env, names.PIPELINE),
        namespace=_name(env, names.NAMESPACE, default="default"),
        epoch=_integer(env, names.EPOCH, minimum=1),
        cluster_id=_cluster_id(env),
        spec=spec,
        code_version=env.get(names.CODE_VERSION, spec.image),
        termination_log=Path(env.get(names.TERMINATION_LOG, names.DEFAULT_TERMINATION_LOG)),
        metrics_port=_optional_port(env, names.METRICS_PORT),
        options=transform_options(spec, env),
        metrics_host=env.get(names.POD_IP, ""),
        standby=env.get(names.STANDBY, "") in ("1", names.STANDBY_HOT),
        hot=hot,
        control_port=_optional_port(env, names.CONTROL_PORT),
        spark_niceness=_niceness(env),
    )


def transform_options(spec: PipelineSpec, env: Mapping[str, str]) -> dict[str, Any]:
    """``transform.options`` with the values of ``transform.optionsFrom``, which the
    operator sets from Secrets as ``SLUICE_OPTION_<option>``."""
    options = dict(spec.transform.options)
    for source in spec.transform.options_from:
        name = names.OPTION_PREFIX + source.option
        if name not in env:
            raise ConfigError(
                f"spec.transform.optionsFrom: option {source.option!r} (Secret "
                f"{source.secret!r}, key {source.key!r}) is not set: {name} is missing from "
                "the driver's environment"
            )
        options[source.option] = env[name]
    return options


def _read_spec(env: Mapping[str, str], config_file: Path | None) -> object:
    if config_file is not None:
        source, text = f"--config {config_file}", _read_file(config_file)
    elif names.CONFIG in env:
        source, text = names.CONFIG, env[names.CONFIG]
    else:
        raise ConfigError("no configuration: set SLUICE_CONFIG to the spec JSON or pass --config")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{source} is not valid JSON: {err}") from None


def _read_file(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read ({err.strerror})") from None


def _name(env: Mapping[str, str], key: str, default: str | None = None) -> str:
    value = env.get(key, default)
    if value is None:
        raise ConfigError(f"{key} is required (the pipeline's Kubernetes name)")
    if not NAME.match(value) or len(value) > 63:
        raise ConfigError(f"{key}={value!r} is not a valid Kubernetes name")
    return value


def _cluster_id(env: Mapping[str, str]) -> str:
    try:
        return cluster.cluster_id(env.get(names.CLUSTER_ID, ""), names.CLUSTER_ID)
    except cluster.ClusterIdError as err:
        raise ConfigError(str(err)) from None


def _integer(env: Mapping[str, str], key: str, minimum: int) -> int:
    value = env.get(key)
    if value is None:
        raise ConfigError(f"{key} is required")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{key}={value!r} is not an integer") from None
    if number < minimum:
        raise ConfigError(f"{key}={number} must be >= {minimum}")
    return number


def _niceness(env: Mapping[str, str]) -> int:
    if not env.get(names.SPARK_NICENESS):
        return NICENESS
    value = _integer(env, names.SPARK_NICENESS, minimum=0)
    if value > MAX_NICENESS:
        raise ConfigError(f"{names.SPARK_NICENESS}={value} must be <= {MAX_NICENESS}")
    return value


def _optional_port(env: Mapping[str, str], key: str) -> int | None:
    if not env.get(key):
        return None
    port = _integer(env, key, minimum=1)
    if port > 65535:
        raise ConfigError(f"{key}={port} is not a TCP port")
    return port
