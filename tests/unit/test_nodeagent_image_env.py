"""The node agent's stand-in for an image's ``ENV`` lines: ``image.env`` in its code root."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client import V1ObjectMeta, V1Pod

from sluice_dev.nodeagent.podspec import ConfigError, image_env

pytestmark = pytest.mark.unit

POD = V1Pod(metadata=V1ObjectMeta(name="kpis-driver-3", namespace="ns"))


def test_an_images_env_file_adds_its_variables_after_its_code_on_the_path(tmp_path: Path) -> None:
    (tmp_path / "image.env").write_text(
        "# the job image's jars\n"
        "SLUICE_SPARK_JARS=/opt/jars/a.jar,/opt/jars/b.jar\n"
        "\n"
        "JAVA_OPTS=-Xss1m=x\n"
    )
    env = image_env(POD, {"PYTHONPATH": "/venv/extra"}, tmp_path)
    assert env == {
        "HOSTNAME": "kpis-driver-3",
        "PYTHONPATH": f"{tmp_path}:/venv/extra",
        "SLUICE_SPARK_JARS": "/opt/jars/a.jar,/opt/jars/b.jar",
        "JAVA_OPTS": "-Xss1m=x",
    }


def test_an_image_without_env_file_or_code_root_adds_only_its_hostname(tmp_path: Path) -> None:
    assert image_env(POD, {}, None) == {"HOSTNAME": "kpis-driver-3"}
    assert set(image_env(POD, {}, tmp_path)) == {"HOSTNAME", "PYTHONPATH"}


def test_a_malformed_line_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "image.env").write_text("A=1\nnot a variable\n")
    with pytest.raises(ConfigError, match=r"image.env:2: expected NAME=value"):
        image_env(POD, {}, tmp_path)
