"""The standby's check of a transform on an empty batch of the source's schema
(``sluice_job.standby.check``), on a real SparkSession: a working transform passes,
one that raises or whose output the sink table cannot take fails with the reason; a
promotion cancels a check in flight (``standby.cancel_warm_up_on``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame

from sluice_job import standby, transform
from sluice_job.sinks import SinkSchemaError
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


class Table:
    """A sink whose table has no column ``tag``; counts the rows it is asked to write."""

    def write(self, frame: DataFrame, version: int, *, dry: bool = False) -> int:
        if "tag" in frame.columns:
            raise SinkSchemaError("sink table ks.events has no column(s) ['tag']")
        return frame.count()


def test_the_examples_transform_passes_on_an_empty_batch(spark_session: Any) -> None:
    function = transform.load("sluice_job.examples.events:transform")
    standby.check(standby.empty_records(spark_session), function, {}, Table())


def test_a_transform_that_raises_fails_the_check_with_its_error(spark_session: Any) -> None:
    def broken(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
        raise RuntimeError("no such column: pagee")

    with pytest.raises(standby.StandbyCheckError, match="RuntimeError: no such column: pagee"):
        standby.check(standby.empty_records(spark_session), broken, {}, None)


def test_an_output_the_sink_table_cannot_take_fails_the_check(spark_session: Any) -> None:
    def tagged(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
        return records.selectExpr("CAST(offset AS STRING) AS id", "'v3' AS tag")

    with pytest.raises(standby.StandbyCheckError, match=r"no column\(s\) \['tag'\]"):
        standby.check(standby.empty_records(spark_session), tagged, {}, Table())


def _held_until(marker: Path) -> Any:
    """A ``mapInPandas`` function whose task holds until ``marker`` exists (a file: the
    task runs in a Python worker of this machine), at most five minutes."""

    def held(frames: Iterator[Any]) -> Iterator[Any]:
        deadline = time.monotonic() + 300
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield from frames

    return held


def held_count(spark: Any, marker: Path) -> int:
    """A one-task Spark job that runs until ``marker`` exists; its row count (1)."""
    frame = spark.range(0, 1, 1, 1).mapInPandas(_held_until(marker), "id long")
    return int(frame.count())


class Held:
    """A sink whose write is a Spark job held until ``marker`` exists: a check's cold
    first job, which took 6.1 s after a promotion in the soak."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def write(self, frame: DataFrame, version: int, *, dry: bool = False) -> int:
        return held_count(frame.sparkSession, self.marker)


def test_a_promotion_cancels_the_check_in_flight_and_no_other_job(
    spark_session: Any, tmp_path: Path
) -> None:
    """Issue 43: a replacement started as a hot standby and promoted when its driver's
    node was lost claimed 6.1 s after the promotion, the time its check's job took to
    finish. The promotion now cancels the check's and warm-up's jobs (their tag) and
    the standby says ready at once; a job not of the warm-up (a batch's) runs on."""
    promoted = threading.Event()
    standby.cancel_warm_up_on(promoted, spark_session)
    pool = ThreadPoolExecutor(2)
    other = pool.submit(held_count, spark_session, tmp_path / "released")
    ready = pool.submit(
        standby.get_ready,
        pipeline="ns/p",
        epoch=5,
        spark=spark_session,
        function=transform.load("sluice_job.examples.events:transform"),
        options={},
        sink=Held(tmp_path / "never"),
        kafka_config={},
        store=None,  # promoted before its warm-up: the checkpoint is not read
        promoted=promoted,
    )
    tracker = spark_session.sparkContext.statusTracker()
    wait_for(
        lambda: len(tracker.getActiveJobsIds()) == 2,
        timeout=120,
        what="the check's job and the other job running",
    )
    promoted.set()
    assert callable(ready.result(timeout=60)), "the promoted standby said ready"
    assert not other.done(), "the job without the warm-up's tag was not cancelled"
    (tmp_path / "released").touch()
    assert other.result(timeout=120) == 1
    pool.shutdown()
