"""Issue 38, finding 4: the keys of an ``envFrom`` ConfigMap or Secret go around the
reserved variables. Reproduction: a ConfigMap with the key ``SLUICE_SPARK_JARS``,
named by ``spark.pod.envFrom[0].configMapRef``, became ``spark.jars`` in the driver:
the CRD checks the manifest, and the key is not in it. Now the operator reads the key
names before it creates the pod and refuses one that makes a reserved variable (the
``EnvironmentAllowed`` condition and a ``ReservedEnvironment`` Event, no pod), and
tells the driver which ``SLUICE_SPARK_*`` names it set."""

from __future__ import annotations

import json

import pytest

from sluice_api import env as env_names
from sluice_api.pod import reserved_keys
from sluice_operator import builders, envfrom
from sluice_operator.actions import CreatePod, Emit, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.envfrom import Kind, Source
from sluice_operator.kube import object_keys
from sluice_operator.model import Status
from sluice_operator.settings import DEFAULTS
from tests.support.observations import SPEC, observed, spec

pytestmark = pytest.mark.unit

OWNER = builders.Owner("kpis", "ns", "u1", "cluster-1")


def with_env_from(*entries: dict[str, object]) -> dict[str, object]:
    return {**SPEC.get("spark", {}), "pod": {"envFrom": list(entries)}}


@pytest.mark.parametrize(
    ("keys", "prefix", "reserved"),
    [
        (("SLUICE_SPARK_JARS", "REGION"), None, ("SLUICE_SPARK_JARS",)),
        (("JAVA_TOOL_OPTIONS", "LD_PRELOAD", "PYTHONPATH", "CLASSPATH"), None, None),
        (("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "PYSPARK_PYTHON", "_JAVA_OPTIONS"), None, None),
        (("SLUICE_SPARK_JARS", "LD_PRELOAD"), "APP_", ()),  # APP_SLUICE_SPARK_JARS: harmless
        (("PARK_CONF_DIR", "REGION"), "S", ("PARK_CONF_DIR",)),  # S + PARK_CONF_DIR
        (("_PRELOAD", "PATH"), "LD", ("_PRELOAD",)),
        (("REGION", "TZ", "sluice_spark_jars"), None, ()),  # names are case-sensitive
    ],
)
def test_reserved_keys_are_those_the_prefix_makes_reserved(
    keys: tuple[str, ...], prefix: str | None, reserved: tuple[str, ...] | None
) -> None:
    assert reserved_keys(keys, prefix) == (keys if reserved is None else reserved)


def test_every_env_from_entry_is_a_source_with_its_field_and_prefix() -> None:
    parsed = spec(
        spark=with_env_from(
            {"configMapRef": {"name": "tenant-env"}},
            {"prefix": "APP_", "secretRef": {"name": "api"}},
        )
    )
    assert envfrom.sources(parsed) == (
        Source(Kind.CONFIG_MAP, "tenant-env", None, "spark.pod.envFrom[0]"),
        Source(Kind.SECRET, "api", "APP_", "spark.pod.envFrom[1]"),
    )


def test_a_refusal_names_the_field_the_object_and_the_key() -> None:
    named = (
        Source(Kind.CONFIG_MAP, "tenant-env", None, "spark.pod.envFrom[0]"),
        Source(Kind.CONFIG_MAP, "tenant-env", "APP_", "spark.pod.envFrom[1]"),
        Source(Kind.SECRET, "api", None, "spark.pod.envFrom[2]"),
        Source(Kind.CONFIG_MAP, "later", None, "spark.pod.envFrom[3]"),
        Source(Kind.SECRET, "loader", "LD", "spark.pod.envFrom[4]"),
    )
    keys = {
        (Kind.CONFIG_MAP, "tenant-env"): ("REGION", "SLUICE_SPARK_JARS"),
        (Kind.SECRET, "api"): ("token",),
        (Kind.CONFIG_MAP, "later"): None,
        (Kind.SECRET, "loader"): ("_PRELOAD",),
    }
    first, missing, prefixed = envfrom.refusals(named, keys)
    assert first.startswith("ConfigMap 'tenant-env' (spark.pod.envFrom[0]) has the key ")
    assert "SLUICE_SPARK_JARS" in first
    assert "REGION" not in first
    assert missing.startswith("ConfigMap 'later' (spark.pod.envFrom[3]) does not exist")
    assert "Secret 'loader' (spark.pod.envFrom[4])" in prefixed
    assert "_PRELOAD (as LD_PRELOAD)" in prefixed


def test_only_key_names_are_taken_from_an_object() -> None:
    secret = {"kind": "Secret", "data": {"token": "czNjcjN0", "LD_PRELOAD": "eA=="}}
    assert object_keys(secret) == ("token", "LD_PRELOAD")
    config_map = {"data": {"REGION": "eu"}, "binaryData": {"SLUICE_SPARK_JARS": "eA=="}}
    assert object_keys(config_map) == ("REGION", "SLUICE_SPARK_JARS")
    assert object_keys({"kind": "ConfigMap"}) == ()


def test_a_reserved_key_creates_no_pod_and_says_why_until_it_is_gone() -> None:
    """Reproduction (old code): ``decide`` created the driver pod whatever the
    ConfigMap held; the refusal is what ``reconcile.observe`` reads into
    ``env_refusals``."""
    parsed = spec(spark=with_env_from({"configMapRef": {"name": "tenant-env"}}))
    line = envfrom.refusals(
        envfrom.sources(parsed), {(Kind.CONFIG_MAP, "tenant-env"): ("SLUICE_SPARK_JARS",)}
    )
    decision = decide(observed(Status(), spec=parsed, env_refusals=line), DEFAULTS)
    assert not any(isinstance(a, CreatePod) for a in decision.actions)
    status = next(a.status for a in decision.actions if isinstance(a, WriteStatus))
    condition = next(c for c in status.conditions if c["type"] == "EnvironmentAllowed")
    assert (condition["status"], condition["reason"]) == ("False", "ReservedName")
    assert "spark.pod.envFrom[0]" in condition["message"]
    assert "SLUICE_SPARK_JARS" in condition["message"]
    assert status.epoch == 0
    assert [e.reason for e in decision.actions if isinstance(e, Emit)] == ["ReservedEnvironment"]
    later = decide(observed(status, spec=parsed), DEFAULTS)
    assert any(isinstance(a, CreatePod) for a in later.actions)
    after = next(a.status for a in later.actions if isinstance(a, WriteStatus))
    condition = next(c for c in after.conditions if c["type"] == "EnvironmentAllowed")
    assert condition["status"] == "True"


@pytest.mark.parametrize("instances", [0, 2])
def test_the_driver_is_told_which_spark_variables_the_operator_set(instances: int) -> None:
    """Reproduction (old code): no ``SLUICE_OPERATOR_SPARK_ENV``, so a driver could not
    tell the operator's ``SLUICE_SPARK_CONF`` from one an ``envFrom`` source put there."""
    executors = {"instances": instances, "cores": 1, "memory": "512m"}
    parsed = spec(spark={**SPEC.get("spark", {}), "executors": executors})
    container = builders.driver_pod(OWNER, parsed, 1, "h")["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    listed = env[env_names.OPERATOR_SPARK_ENV]["value"]
    set_here = {n for n in env if n.startswith(env_names.SPARK_PREFIX)}
    assert set(filter(None, listed.split(","))) == set_here
    if instances:
        assert set_here >= {env_names.SPARK_CONF, env_names.SPARK_MASTER}
        assert json.loads(env[env_names.SPARK_CONF]["value"])
    else:
        assert listed == ""
