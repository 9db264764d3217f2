"""The class archive's training run, as far as it is pure: a driver's session
configuration writing the archive as the JVM exits, and the records it runs the
examples over. The archive itself is made and mapped by a real JVM in
tests/integration/test_class_archive.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice_job import class_archive, spark
from sluice_job.class_archive import records, training_conf

pytestmark = pytest.mark.unit


def test_the_training_session_is_a_drivers_that_writes_the_archive_instead_of_mapping_one(
    tmp_path: Path,
) -> None:
    env = {"SLUICE_SPARK_CLASS_ARCHIVE": "/opt/old.jsa", "SLUICE_SPARK_JARS": "/j/kafka.jar"}
    conf = training_conf(env, "/venv/bin/python", tmp_path / "spark.jsa.partial")
    options = conf["spark.driver.extraJavaOptions"].split()
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'spark.jsa.partial'}" in options
    assert "-XX:TieredStopAtLevel=1" in options, "the JIT a driver has"
    assert not any("SharedArchiveFile" in o for o in options), "the JVM cannot map and write"
    assert conf["spark.jars"] == "/j/kafka.jar"
    driver = spark.spark_conf(
        class_archive.PipelineSpec.model_validate(class_archive.TRAINING_SPEC),
        {},
        "sluice-class-archive",
        "/venv/bin/python",
    )
    same = {
        k: v for k, v in conf.items() if k not in {"spark.driver.extraJavaOptions", "spark.jars"}
    }
    assert same == {k: v for k, v in driver.items() if k != "spark.driver.extraJavaOptions"}


def test_the_training_records_are_kafka_records_of_ui_events_one_in_ten_malformed() -> None:
    rows = records(20, 100)
    assert [r["offset"] for r in rows] == list(range(100, 120))
    assert {r["partition"] for r in rows} == {0, 1, 2}
    malformed = [r for r in rows if r["value"] == b"{"]
    assert [r["offset"] for r in malformed] == [109, 119]
    event = json.loads(rows[0]["value"])
    assert set(event) == {"event_id", "seq", "page", "action", "user_id", "ts"}
    assert len(rows[0]) == len(class_archive.reader.KAFKA_RECORD.fields)
