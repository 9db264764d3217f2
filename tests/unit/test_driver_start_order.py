"""The driver launches Spark's JVM before it creates any gRPC client (issue 43, item
5: one Pub/Sub driver start in seven exited 1 within 2 s, "Epoll1Poller ...
epoll_wait error: Bad file descriptor" then "[JAVA_GATEWAY_EXITED] Java gateway
process exited before sending its port number").

PySpark launches the JVM with a fork; gRPC's fork handlers, run beside a live channel,
broke the launch: a script that keeps a gRPC channel busy and then starts a
SparkSession failed 1 run in 4 here with exactly those two lines (0 in 6 with
``GRPC_ENABLE_FORK_SUPPORT=false``, which confirms the cause). The driver created the
Pub/Sub dead-letter publisher and the sink (Datastore's client speaks gRPC) before
the session; on the old code this test saw them first."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from sluice_api.spec import PipelineSpec
from sluice_job import driver, spark, transform
from sluice_job.config import DriverConfig
from sluice_job.runner import Progress

pytestmark = pytest.mark.unit


class LaunchedError(Exception):
    """Stands for the JVM's launch: the test stops the start there."""


def test_the_spark_session_starts_before_the_dead_letter_publisher_and_the_sink(
    tmp_path: Path,
) -> None:
    spec = PipelineSpec.model_validate(
        {
            "image": "i",
            "source": {"pubsub": {"project": "my-project", "subscription": "events-sub"}},
            "transform": {"entrypoint": "m:f"},
            "sink": {"datastore": {"project": "my-project", "kind": "Event"}},
            "deadLetter": {"pubsub": {"topic": "events-dlq"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
        }
    )
    cfg = DriverConfig("kpis", "ns", "cluster", 3, spec, "v1", tmp_path / "log", None)
    order: list[str] = []

    def record(name: str, result: Any = None) -> Any:
        def called(*_: Any, **__: Any) -> Any:
            order.append(name)
            if isinstance(result, BaseException):
                raise result
            return result

        return called

    with (
        mock.patch.object(driver.clients, "metrics", record("metrics", mock.MagicMock())),
        mock.patch.object(transform, "load", record("transform")),
        mock.patch.object(driver, "connect", record("checkpoint", (mock.Mock(), mock.Mock()))),
        mock.patch.object(driver, "CheckpointStore", mock.MagicMock()),
        mock.patch.object(driver.clients, "dead_letters", record("dead letters")),
        mock.patch.object(driver.clients, "sink", record("sink")),
        mock.patch.object(spark, "session", record("spark session", LaunchedError())),
        pytest.raises(LaunchedError),
    ):
        driver._run(cfg, threading.Event(), Progress())
    assert "spark session" in order
    assert "dead letters" not in order
    assert "sink" not in order


def test_the_jvm_starts_while_the_driver_connects_to_the_checkpoint_store(
    tmp_path: Path,
) -> None:
    """Issue 43, item 6: a driver replacing a failed one took 11 s from its process's
    start to its claim in a soak, the JVM's launch (seconds of CPU) after the
    checkpoint store's connection and schema check (round trips). They overlap now:
    here the session's start waits for the connection, and the connection for the
    session's start, so done one after the other (the old code) they never meet."""
    spec = PipelineSpec.model_validate(
        {
            "image": "i",
            "source": {"kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}},
            "transform": {"entrypoint": "m:f"},
            "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "ks", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
        }
    )
    cfg = DriverConfig("kpis", "ns", "cluster", 3, spec, "v1", tmp_path / "log", None)
    launching, connecting = threading.Event(), threading.Event()

    def session(_conf: Any) -> Any:
        launching.set()
        if not connecting.wait(10):
            raise AssertionError("the checkpoint store was not reached while the JVM started")
        raise LaunchedError

    def connect(*_: Any) -> Any:
        connecting.set()
        if not launching.wait(10):
            raise AssertionError("the JVM did not start while the checkpoint store was reached")
        return mock.Mock(), mock.Mock()

    with (
        mock.patch.object(driver.clients, "metrics", mock.MagicMock()),
        mock.patch.object(transform, "load", mock.Mock()),
        mock.patch.object(driver, "connect", connect),
        mock.patch.object(driver, "CheckpointStore", mock.MagicMock()),
        mock.patch.object(spark, "session", session),
        pytest.raises(LaunchedError),
    ):
        driver._run(cfg, threading.Event(), Progress())
