"""A dependency outage is waited out, never counted as a failure of the pipeline:
which errors are outages, how long the driver waits, and that the loop runs the same
batch again under the same epoch once the dependency is back."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from cassandra import ConsistencyLevel, Unavailable, WriteTimeout, WriteType
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import OverloadedErrorMessage

from sluice_job.checkpoint import Batch
from sluice_job.deadletter import DeadLetterError, DeadLetterUnavailableError
from sluice_job.outages import CASSANDRA, KAFKA, Backoff, dependency_of, through_outages
from sluice_job.watermarks import KafkaUnavailableError
from tests.unit.test_runner import TP0, FakeStore, runner

pytestmark = pytest.mark.unit

SPARK_TASK_FAILURE = """An error occurred while calling o123.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 7.0
failed 1 times, most recent failure: Lost task 0.0 in stage 7.0 (TID 9) (127.0.0.1
executor driver): org.apache.spark.api.python.PythonException: Traceback (most recent
call last):
  File "/work/main/job/sluice_job/sinks/cassandra.py", line 104, in write_partition
cassandra.cluster.NoHostAvailable: ('Unable to complete the operation against any hosts',
{<Host: 127.0.0.1:9042 datacenter1>: ConnectionRefusedError(111, "Tried connecting")})
"""


SPARK_TASK_CONNECTION_RESET = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/work/main/job/sluice_job/sinks/cassandra_writer.py", line 85, in write_rows
    for _ in execute_concurrent(
  File "cassandra/concurrent.py", line 127, in _results
cassandra.connection.ConnectionShutdown: [Errno 104] Connection reset by peer
"""
"""A sink write inside a Spark task when Cassandra stopped (the live alert test): the
driver took it for a real failure and exited, on the old code."""


SPARK_TASK_SERVER_SHUTTING_DOWN = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/work/main/job/sluice_job/sinks/cassandra_writer.py", line 85, in write_rows
    for _ in execute_concurrent(
  File "cassandra/concurrent.py", line 127, in _results
cassandra.protocol.OverloadedErrorMessage: <Error from server: code=1001 [Coordinator node
overloaded] message="Server is shutting down">
"""
"""A sink write inside a Spark task while Cassandra was being stopped (the soak of 2
December): on the old code the driver exited 1, a failure, and its replacement
started cold during the outage (21.7 s from Cassandra back to the next commit)."""


class Py4JError(Exception):
    """Stands in for py4j's Py4JJavaError: only its text says what happened."""


@pytest.mark.parametrize(
    ("err", "dependency"),
    [
        (NoHostAvailable("down", {}), CASSANDRA),
        (Unavailable("not enough replicas", ConsistencyLevel.QUORUM, 2, 1), CASSANDRA),
        (WriteTimeout("timed out", write_type=WriteType.CAS), CASSANDRA),
        (KafkaUnavailableError("Kafka at k:9092: transport failure"), KAFKA),
        (DeadLetterUnavailableError("3 of 9 rejects not confirmed (timed out)"), KAFKA),
        (DeadLetterError("dead-letter topic 'dlq' at k:9092: missing; create it"), None),
        (Py4JError(SPARK_TASK_FAILURE), CASSANDRA),
        (Py4JError(SPARK_TASK_CONNECTION_RESET), CASSANDRA),
        (Py4JError(SPARK_TASK_SERVER_SHUTTING_DOWN), CASSANDRA),
        (OverloadedErrorMessage(0x1001, "Server is shutting down", None), CASSANDRA),
        (RuntimeError("wrapped"), None),
        (ValueError("transform raised: division by zero"), None),
        (Py4JError("pyspark.errors.exceptions.captured.AnalysisException: no column x"), None),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_which_errors_are_outages(err: BaseException, dependency: str | None) -> None:
    assert dependency_of(err) == dependency


def test_an_outage_is_found_along_the_exception_chain() -> None:
    wrapped = RuntimeError("checkpoint store: commit failed")
    wrapped.__cause__ = NoHostAvailable("down", {})
    assert dependency_of(wrapped) == CASSANDRA


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [Backoff(0.5, 5.0).delay(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 5, 5]


@dataclass
class Watched:
    seen: list[tuple[str, bool]] = field(default_factory=list)

    def dependency(self, name: str, *, available: bool, detail: str = "") -> None:
        self.seen.append((name, available))


def test_a_step_runs_again_until_the_dependency_is_back() -> None:
    attempts, pauses, watched = [0], list[float](), Watched()

    def step() -> str:
        attempts[0] += 1
        if attempts[0] < 4:
            raise NoHostAvailable("down", {})
        return "done"

    assert through_outages("commit", step, watched, pause=pauses.append) == "done"
    assert attempts == [4]
    assert pauses == [0.5, 1.0, 2.0]
    assert watched.seen == [(CASSANDRA, False)] * 3 + [(CASSANDRA, True)]


def test_a_real_failure_is_not_retried() -> None:
    pauses: list[float] = []
    with pytest.raises(ValueError, match="bad record"):
        through_outages(
            "batch 1", _raises(ValueError("bad record")), Watched(), pause=pauses.append
        )
    assert pauses == []


def _raises(err: Exception):  # type: ignore[no-untyped-def]
    def call() -> None:
        raise err

    return call


@dataclass
class FlakyStore(FakeStore):
    """Cassandra away for the first ``down`` commit attempts."""

    down: int = 3
    attempts: int = 0

    def commit(self, batch: Batch, started_at):  # type: ignore[no-untyped-def]
        self.attempts += 1
        if self.attempts <= self.down:
            raise NoHostAvailable("Unable to connect to any servers", {})
        return super().commit(batch, started_at)


def test_the_loop_waits_out_an_outage_and_commits_the_same_batch_under_its_epoch() -> None:
    """Reproduction: before, the first NoHostAvailable ended the driver (exit 1), the
    operator started a new driver under a new epoch, and enough of them in a row ended
    the pipeline Failed."""
    from tests.unit.test_runner import Watermarks

    marks = {TP0: Watermarks(0, 20)}
    store = FlakyStore(down=3)
    loop = runner(store, marks, cap=10)
    pauses: list[float] = []
    loop.pause = pauses.append
    loop.run()
    assert [b.batch_id for b in store.committed] == [1, 2]
    assert store.attempts == 3 + 2
    assert pauses == [0.5, 1.0, 2.0]
    assert loop.epoch == 2
    assert loop.progress.positions == {TP0: 20}
