"""docs/writing-a-transform.md tells a transform's author what the job image runs:
its Python, Java, PySpark, pandas and pyarrow versions, and that Spark SQL's ANSI mode
is on (issue 39 item 5). The versions are read here from where the image pins them
(``Dockerfile.job``, ``job/requirements.txt``, ``job/jars.txt``), so the table cannot
drift from the pins."""

from __future__ import annotations

import re

import pytest

from sluice_api.spark_conf import spark_conf_allowed
from sluice_dev import pins
from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.unit

DOC = REPO_ROOT / "docs" / "writing-a-transform.md"
SECTION = "## What your code runs on"


def runtime_table() -> dict[str, tuple[str, str]]:
    """The section's table: first cell -> (version, pinned in)."""
    text = DOC.read_text()
    assert SECTION in text, f"{DOC.name} lost its section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return {
        cells[0].strip(): (cells[1].strip(), cells[2].strip())
        for cells in rows
        if cells[0].strip()  # not the header
    }


def dockerfile_arg(name: str) -> str:
    found = re.search(rf"^ARG {name}=(\S+)$", (REPO_ROOT / "Dockerfile.job").read_text(), re.M)
    assert found, f"Dockerfile.job has no ARG {name}"
    return found[1]


def job_pin(name: str) -> str:
    path = pins.IMAGE_REQUIREMENTS["job"]
    return pins.parse(path.read_text(), str(path))[name].version


def test_python_is_the_job_images_base() -> None:
    image = dockerfile_arg("PYTHON_IMAGE")  # python:3.11.18-slim-bookworm
    version = re.fullmatch(r"python:([0-9.]+)-.+", image)
    assert version, image
    assert runtime_table()["Python"][0] == version[1]
    assert f"`{image}`" in runtime_table()["Python"][1]


def test_java_is_the_job_images_jre() -> None:
    image = dockerfile_arg("JRE_IMAGE")  # eclipse-temurin:17.0.21.1_2-jre-jammy
    version = re.fullmatch(r"eclipse-temurin:([0-9.]+)_([0-9]+)-jre.*", image)
    assert version, image
    assert runtime_table()["Java"][0].startswith(f"{version[1]}+{version[2]} ")


@pytest.mark.parametrize(("row", "package"), [("pandas", "pandas"), ("pyarrow", "pyarrow")])
def test_python_packages_are_the_job_images_pins(row: str, package: str) -> None:
    assert runtime_table()[row] == (job_pin(package), "`job/requirements.txt`")


def test_pyspark_and_its_scala_are_the_job_images() -> None:
    [(row, (version, pinned_in))] = [
        (name, cells) for name, cells in runtime_table().items() if name.startswith("PySpark")
    ]
    assert (version, pinned_in) == (job_pin("pyspark"), "`job/requirements.txt`")
    connector = re.search(
        r"spark-sql-kafka-0-10_([0-9.]+)/([0-9.]+)/", (REPO_ROOT / "job" / "jars.txt").read_text()
    )
    assert connector, "job/jars.txt lists no spark-sql-kafka connector"
    assert f"Scala {connector[1]}" in row
    assert connector[2] == version, "the Kafka connector is for another Spark"


def test_ansi_mode_stays_on_and_the_doc_says_so() -> None:
    """Spark 4's default; a pipeline cannot turn it off through ``spec.spark.conf``
    (``tests/integration/test_transform_testing.py`` shows a cast failing under it)."""
    assert not spark_conf_allowed("spark.sql.ansi.enabled")
    assert int(job_pin("pyspark").split(".")[0]) >= 4
    section = DOC.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    assert "**Spark SQL runs in ANSI mode.**" in section
    assert "try_cast" in section
