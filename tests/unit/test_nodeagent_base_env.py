"""The part of the node agent's own environment its pods inherit: what a driver needs
(``JAVA_HOME``, Spark's JVM options, the stack marker), never the rest (a kubeconfig,
a test's variables)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sluice_dev.nodeagent.settings import base_env

pytestmark = pytest.mark.unit

AGENT = {
    "PATH": "/usr/bin:/bin",
    "JAVA_HOME": "/usr/lib/jvm/java-17",
    "SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1",
    "SPARK_LAUNCHER_OPTS": "-XX:TieredStopAtLevel=1",
    "SLUICE_STACK": "/tmp/stack",
    "KUBECONFIG": "/root/.kube/config",
    "PYTEST_CURRENT_TEST": "tests/x.py::test_y",
}


def test_pods_get_spark_jvm_options_and_the_stack_marker_but_not_the_kubeconfig() -> None:
    env = base_env(AGENT)

    assert env["SPARK_SUBMIT_OPTS"] == "-XX:TieredStopAtLevel=1"
    assert env["SPARK_LAUNCHER_OPTS"] == "-XX:TieredStopAtLevel=1"
    assert env["JAVA_HOME"] == "/usr/lib/jvm/java-17"
    assert env["SLUICE_STACK"] == "/tmp/stack"
    assert "KUBECONFIG" not in env
    assert "PYTEST_CURRENT_TEST" not in env


def test_the_agents_interpreter_comes_first_on_path_and_pass_env_adds_a_name() -> None:
    env = base_env({**AGENT, "EXTRA": "1"}, ["EXTRA"])

    assert env["PATH"].split(":") == [str(Path(sys.executable).parent), "/usr/bin", "/bin"]
    assert env["EXTRA"] == "1"
