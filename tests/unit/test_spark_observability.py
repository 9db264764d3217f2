"""``spec.spark.ui`` and ``spec.spark.eventLog``: Spark's UI on a named port of the
driver, and event logs where a History Server reads them; both off by default."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluice_api.spec import PipelineSpec
from sluice_job.spark import spark_conf
from sluice_operator import builders

pytestmark = pytest.mark.unit

OWNER = builders.Owner("orders", "team-a", "uid-1", "cluster-1")
VOLUME = {
    "volumes": [{"name": "events", "persistentVolumeClaim": {"claimName": "spark-events"}}],
    "volumeMounts": [{"name": "events", "mountPath": "/spark-events"}],
}


def spec(**spark: Any) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "image": "orders:1",
            "source": {"kafka": {"bootstrapServers": "kafka:9092", "topics": ["orders"]}},
            "transform": {"entrypoint": "orders.transform:run"},
            "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
            "spark": spark,
        }
    )


def test_both_are_off_by_default() -> None:
    conf = spark_conf(spec(), {}, "app", "python")
    assert conf["spark.ui.enabled"] == "false"
    assert not any(key.startswith("spark.eventLog") for key in conf)
    pod = builders.driver_pod(OWNER, spec(), 1, "h")
    assert "ui" not in {p["name"] for p in pod["spec"]["containers"][0]["ports"]}


def test_the_ui_listens_on_4040_named_on_the_pod_and_its_service() -> None:
    settings = spec(ui={"enabled": True}, conf={"spark.ui.enabled": "false"})
    conf = spark_conf(settings, {}, "app", "python")
    assert (conf["spark.ui.enabled"], conf["spark.ui.port"]) == ("true", "4040")  # the field wins
    pod = builders.driver_pod(OWNER, settings, 1, "h")
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports["ui"] == 4040
    [service] = [m for m in builders.supporting(OWNER, settings) if m["kind"] == "Service"]
    assert {"name": "ui", "port": 4040} in service["spec"]["ports"]


def test_event_logs_roll_on_a_mounted_volume() -> None:
    conf = spark_conf(spec(pod=VOLUME, eventLog={"dir": "/spark-events"}), {}, "app", "python")
    assert conf["spark.eventLog.enabled"] == "true"
    assert conf["spark.eventLog.dir"] == "/spark-events"
    assert conf["spark.eventLog.rolling.enabled"] == "true"  # a pipeline never ends
    uri = spark_conf(spec(eventLog={"dir": "s3a://logs/spark"}), {}, "app", "python")
    assert uri["spark.eventLog.dir"] == "s3a://logs/spark"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"eventLog": {"dir": "/var/log/spark"}}, "not on a writable volume"),
        (
            {
                "eventLog": {"dir": "/spark-events/x"},
                "pod": {
                    "volumes": VOLUME["volumes"],
                    "volumeMounts": [
                        {"name": "events", "mountPath": "/spark-events", "readOnly": True}
                    ],
                },
            },
            "not on a writable volume",
        ),
        ({"eventLog": {"dir": "/spark-eventsx"}, "pod": VOLUME}, "not on a writable volume"),
        ({"eventLog": {"dir": "relative/dir"}}, "should match pattern"),
    ],
)
def test_an_event_log_dir_nowhere_writable_is_refused(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        spec(**settings)
