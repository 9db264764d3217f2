"""The Kafka client settings of a batch read (``sluice_job.reader``)."""

from __future__ import annotations

import pytest

from sluice_job import reader

pytestmark = pytest.mark.unit

GROUP = "sluice.team-a.orders"


def test_batch_reads_name_the_pipelines_group_so_spark_reuses_its_consumers() -> None:
    config = reader.client_config({"bootstrap.servers": "kafka:9092"}, GROUP)
    assert config["group.id"] == GROUP
    assert config["bootstrap.servers"] == "kafka:9092"


def test_the_broker_does_not_hold_a_fetch_past_the_range_for_half_a_second() -> None:
    config = reader.client_config({"bootstrap.servers": "kafka:9092"}, GROUP)
    assert int(config["fetch.max.wait.ms"]) <= 50


def test_a_users_own_fetch_wait_is_kept() -> None:
    config = reader.client_config({"fetch.max.wait.ms": "200"}, GROUP)
    assert config["fetch.max.wait.ms"] == "200"
