"""Bad configuration: the driver process exits 2 and names the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.unit

VALID: dict[str, Any] = {
    "image": "local/test",
    "source": {"kafka": {"bootstrapServers": "127.0.0.1:1", "topics": ["t"]}},
    "transform": {"entrypoint": "sluice_job.examples.events:transform"},
    "sink": {"cassandra": {"contactPoints": ["127.0.0.1:1"], "keyspace": "k", "table": "t"}},
    "checkpoint": {"cassandra": {"contactPoints": ["127.0.0.1:1"]}},
}


def with_change(path: str, value: Any) -> dict[str, Any]:
    spec = json.loads(json.dumps(VALID))
    *parents, last = path.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return spec


CASES = [
    ("topics empty", with_change("source.kafka.topics", []), "spec.source.kafka.topics"),
    (
        "cap zero",
        with_change("source.kafka.maxRecordsPerPartition", 0),
        "spec.source.kafka.maxRecordsPerPartition",
    ),
    (
        "unknown policy",
        with_change("source.kafka.onOffsetOutOfRange", "sometimes"),
        "spec.source.kafka.onOffsetOutOfRange",
    ),
    (
        "two sinks",
        with_change("sink.datastore", {"project": "p", "kind": "k"}),
        "exactly one of sink.cassandra or sink.datastore",
    ),
    ("no sink", with_change("sink", {}), "exactly one of sink.cassandra or sink.datastore"),
    (
        "order column not a column name",
        with_change("sink.orderColumn", "_sluice_version"),
        "spec.sink.orderColumn",
    ),
    ("typo", {**VALID, "sourc": {}}, "spec.sourc"),
    (
        "entrypoint shape",
        with_change("transform.entrypoint", "nocolon"),
        "spec.transform.entrypoint",
    ),
    (
        "entrypoint missing",
        with_change("transform.entrypoint", "no_such_module:f"),
        "spec.transform.entrypoint",
    ),
    ("memory", with_change("spark.driver", {"memory": "lots"}), "spec.spark.driver.memory"),
    ("image", with_change("image", ""), "spec.image"),
    (
        "backpressure without an interval",
        {
            **with_change("source.kafka.backpressure", {"enabled": True}),
            "trigger": {"intervalSeconds": 0},
        },
        "source.kafka.backpressure.enabled needs trigger.intervalSeconds > 0",
    ),
    (
        "backpressure utilization",
        with_change("source.kafka.backpressure", {"enabled": True, "targetUtilization": 0}),
        "spec.source.kafka.backpressure.targetUtilization",
    ),
    (
        "dead letters into a source topic",
        with_change("deadLetter", {"kafka": {"topic": "t"}}),
        "deadLetter.kafka.topic must not be one of source.kafka.topics",
    ),
]


def run_driver(tmp_path: Path, env: dict[str, str]) -> tuple[int, str, dict[str, Any]]:
    termination = tmp_path / "termination.json"
    child_env = {
        "PATH": os.environ["PATH"],
        # This checkout's code first, as tests.support.driver does (an installed copy
        # of the packages may point at another checkout).
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        "SLUICE_TERMINATION_LOG": str(termination),
        **env,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "sluice_job"],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    message = json.loads(termination.read_text()) if termination.exists() else {}
    return proc.returncode, proc.stderr, message


@pytest.mark.parametrize(("case", "spec", "field"), CASES, ids=[c[0] for c in CASES])
def test_invalid_spec_exits_2_naming_the_field(
    tmp_path: Path, case: str, spec: dict[str, Any], field: str
) -> None:
    identity = {
        "SLUICE_PIPELINE": "p",
        "SLUICE_NAMESPACE": "ns",
        "SLUICE_CLUSTER_ID": "c1",
        "SLUICE_EPOCH": "1",
    }
    code, stderr, message = run_driver(tmp_path, {"SLUICE_CONFIG": json.dumps(spec), **identity})
    assert code == 2, stderr[-2000:]
    assert field in message["message"]
    assert message["reason"] == "InvalidConfig"


OK_ENV = {
    "SLUICE_CONFIG": json.dumps(VALID),
    "SLUICE_PIPELINE": "p",
    "SLUICE_CLUSTER_ID": "c",
    "SLUICE_EPOCH": "1",
}


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({}, "SLUICE_CONFIG"),
        ({"SLUICE_CONFIG": "{not json"}, "SLUICE_CONFIG is not valid JSON"),
        ({"SLUICE_CONFIG": json.dumps(VALID), "SLUICE_PIPELINE": "p"}, "SLUICE_EPOCH"),
        (
            {"SLUICE_CONFIG": json.dumps(VALID), "SLUICE_PIPELINE": "p", "SLUICE_EPOCH": "zero"},
            "SLUICE_EPOCH",
        ),
        ({"SLUICE_CONFIG": json.dumps(VALID), "SLUICE_EPOCH": "1"}, "SLUICE_PIPELINE"),
        (
            {"SLUICE_CONFIG": json.dumps(VALID), "SLUICE_PIPELINE": "p", "SLUICE_EPOCH": "1"},
            "SLUICE_CLUSTER_ID is empty",
        ),
        (
            {
                "SLUICE_CONFIG": json.dumps(VALID),
                "SLUICE_PIPELINE": "p",
                "SLUICE_CLUSTER_ID": "eu/west",
                "SLUICE_EPOCH": "1",
            },
            "SLUICE_CLUSTER_ID='eu/west' is not a cluster id",
        ),
        (
            {**OK_ENV, "SLUICE_SPARK_NICENESS": "low"},
            "SLUICE_SPARK_NICENESS='low' is not an integer",
        ),
        ({**OK_ENV, "SLUICE_SPARK_NICENESS": "20"}, "SLUICE_SPARK_NICENESS=20 must be <= 19"),
    ],
    ids=[
        "no config",
        "not json",
        "no epoch",
        "epoch not a number",
        "no pipeline name",
        "no cluster id",
        "cluster id with a slash",
        "niceness not a number",
        "niceness above 19",
    ],
)
def test_invalid_environment_exits_2_naming_the_variable(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    code, stderr, message = run_driver(tmp_path, env)
    assert code == 2, stderr[-2000:]
    assert named in message["message"]


@pytest.mark.parametrize(("value", "expected"), [(None, 10), ("0", 0), ("19", 19)])
def test_spark_runs_at_niceness_10_unless_the_environment_says_otherwise(
    value: str | None, expected: int
) -> None:
    from sluice_job import config as driver_config

    env = OK_ENV if value is None else {**OK_ENV, "SLUICE_SPARK_NICENESS": value}
    assert driver_config.load(env).spark_niceness == expected


def test_options_from_secrets_join_the_options_and_a_missing_one_names_the_field() -> None:
    """Issue 14 item 6: secret options come from the pod's secretKeyRef env vars."""
    from sluice_api.spec import PipelineSpec
    from sluice_job.config import ConfigError, transform_options
    from sluice_operator.builders import credential_env

    raw = json.loads(json.dumps(VALID))
    raw["transform"]["options"] = {"windowSeconds": 60}
    raw["transform"]["optionsFrom"] = [{"option": "apiToken", "secret": "kpi", "key": "token"}]
    spec = PipelineSpec.model_validate(raw)

    [env] = [e for e in credential_env(spec) if e["name"] == "SLUICE_OPTION_apiToken"]
    assert env == {
        "name": "SLUICE_OPTION_apiToken",
        "valueFrom": {"secretKeyRef": {"name": "kpi", "key": "token"}},
    }
    assert transform_options(spec, {"SLUICE_OPTION_apiToken": "s3cr\"t'\\"}) == {
        "windowSeconds": 60,
        "apiToken": "s3cr\"t'\\",
    }
    with pytest.raises(ConfigError, match=r"spec\.transform\.optionsFrom: option 'apiToken'"):
        transform_options(spec, {})


@pytest.mark.parametrize(
    ("options_from", "says"),
    [
        ([{"option": "windowSeconds", "secret": "s", "key": "k"}], "not both"),
        (
            [
                {"option": "t", "secret": "a", "key": "k"},
                {"option": "t", "secret": "b", "key": "k"},
            ],
            "named once",
        ),
    ],
)
def test_an_option_set_twice_is_refused_naming_the_field(
    options_from: list[dict[str, str]], says: str
) -> None:
    """The API server's schema cannot see into the free-form options; the driver's
    model refuses the overlap (exit 2 naming the field), and the CRD the duplicate."""
    from pydantic import ValidationError

    from sluice_api.spec import PipelineSpec
    from sluice_api.validation import describe

    raw = json.loads(json.dumps(VALID))
    raw["transform"]["options"] = {"windowSeconds": 60}
    raw["transform"]["optionsFrom"] = options_from
    with pytest.raises(ValidationError) as err:
        PipelineSpec.model_validate(raw)
    assert "spec.transform" in describe(err.value)
    assert says in describe(err.value)
