"""The Datastore sink with the real ``google-cloud-datastore`` client against the
stack's Datastore server: idempotent re-runs, the version rule against late
writers, retries of injected transient errors, clear failures, commits of at most
500 entities, and one real driver run from Kafka into Datastore."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice_dev.datastore import remote
from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from sluice_job.sinks import SinkSchemaError
from sluice_job.sinks.datastore import DatastoreSink, DatastoreWriteError
from sluice_job.sinks.datastore_entities import VERSION_PROPERTY
from sluice_job.write_order import write_version
from tests.support import datastore, expected, state
from tests.support.driver import Driver, drain_and_stop, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def events(spark: SparkSession, count: int, tag: str, partitions: int = 1) -> DataFrame:
    """``count`` rows keyed ``e-0 .. e-<count-1>``, with a sequence number and a tag."""
    return (
        spark.range(count, numPartitions=partitions)
        .select(
            F.concat(F.lit("e-"), F.col("id").cast("string")).alias("__key__"),
            F.col("id").alias("seq"),
            F.lit(tag).alias("tag"),
        )
        .cache()
    )


def sink(project: str, host: str) -> DatastoreSink:
    return DatastoreSink(datastore.target(project, host))


def tags(project: str, host: str) -> dict[Any, tuple[str, int]]:
    return {
        key: (e["tag"], e[VERSION_PROPERTY]) for key, e in datastore.entities(project, host).items()
    }


def test_rerunning_a_batch_leaves_one_entity_per_key_with_its_values(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    frame = events(spark_session, 1_200, "v1", partitions=3)
    version = write_version(3, 1)
    writer = sink(datastore_project, datastore_host)
    writer.write(frame, version)
    writer.write(frame, version)  # a Spark task retry, or the batch re-run

    stored = datastore.entities(datastore_project, datastore_host)
    assert len(stored) == 1_200
    assert {e["seq"] for e in stored.values()} == set(range(1_200))
    assert all(key == f"e-{e['seq']}" for key, e in stored.items())
    assert {(e["tag"], e[VERSION_PROPERTY]) for e in stored.values()} == {("v1", version)}
    assert (writer.last.rows, writer.last.written, writer.last.skipped) == (1_200, 1_200, 0)


def test_a_dry_run_write_counts_the_rows_and_sends_nothing(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    """A standby's warm-up runs the sink's job with ``dry``: the entities are built on
    the executors, none is looked up or committed."""
    writer = sink(datastore_project, datastore_host)
    writer.write(events(spark_session, 300, "stored"), write_version(3, 1))

    assert writer.write(events(spark_session, 500, "dry", 2), write_version(9, 2), dry=True) == 500

    assert (writer.last.rows, writer.last.written, writer.last.chunks) == (500, 0, 0)
    assert set(tags(datastore_project, datastore_host).values()) == {
        ("stored", write_version(3, 1))
    }
    assert len(datastore.entities(datastore_project, datastore_host)) == 300


def test_a_late_write_of_an_older_version_does_not_overwrite_newer_data(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    newer = write_version(7, 2)
    writer = sink(datastore_project, datastore_host)
    writer.write(events(spark_session, 600, "epoch-2"), newer)

    zombie = sink(datastore_project, datastore_host)
    zombie.write(events(spark_session, 600, "epoch-1"), write_version(7, 1))  # fenced driver
    zombie.write(events(spark_session, 600, "batch-6"), write_version(6, 9))  # an older batch
    assert set(tags(datastore_project, datastore_host).values()) == {("epoch-2", newer)}
    assert (zombie.last.written, zombie.last.skipped) == (0, 600)

    later = write_version(8, 1)
    writer.write(events(spark_session, 600, "batch-8"), later)
    assert set(tags(datastore_project, datastore_host).values()) == {("batch-8", later)}


def ordered_events(spark: SparkSession, rows: list[tuple[str, int | None, str]]) -> DataFrame:
    """Entities ``(key, event time in ms, tag)``, the time in column ``at``."""
    frame = spark.createDataFrame(rows, "`__key__` string, ms bigint, tag string")
    return frame.select("__key__", F.timestamp_millis("ms").alias("at"), "tag")


def test_with_an_order_column_the_newest_event_of_a_key_wins_whatever_the_batch_order(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    """Issue 39, item 1: the later batch won, so a late older event overwrote the
    latest state of its key; ``sink.orderColumn`` orders the writes by event time."""
    base = 1_700_000_000_000
    writer = DatastoreSink(datastore.target(datastore_project, datastore_host), order="at")
    newest = [(f"o-{i}", base + 10, "shipped") for i in range(4)]
    writer.write(ordered_events(spark_session, newest), write_version(5, 1))
    # A later batch: older events of every order, o-0's newer one, and two events of
    # o-1 in one batch of which the newer (not the later row) must win.
    late = [(f"o-{i}", base + 5, "paid") for i in range(4)] + [
        ("o-0", base + 20, "delivered"),
        ("o-1", base + 30, "returned"),
        ("o-1", base + 25, "refunded"),
    ]
    writer.write(ordered_events(spark_session, late), write_version(9, 1))
    stored = datastore.entities(datastore_project, datastore_host)
    assert {k: e["tag"] for k, e in stored.items()} == {
        "o-0": "delivered",
        "o-1": "returned",
        "o-2": "shipped",
        "o-3": "shipped",
    }
    assert stored["o-2"][VERSION_PROPERTY] == write_version(base + 10, 1)

    # A replay by a newer driver (epoch 2) of the same events replaces them at equal
    # times, and its older events still lose.
    writer.write(ordered_events(spark_session, newest), write_version(11, 2))
    again = datastore.entities(datastore_project, datastore_host)
    assert again["o-2"][VERSION_PROPERTY] == write_version(base + 10, 2)
    assert again["o-0"]["tag"] == "delivered"


def test_an_order_column_that_is_null_or_not_a_time_fails_the_write_naming_it(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    writer = DatastoreSink(datastore.target(datastore_project, datastore_host), order="at")
    with pytest.raises(Exception, match=r"sink\.orderColumn 'at' is null"):
        writer.write(ordered_events(spark_session, [("o-1", None, "paid")]), write_version(3, 1))
    assert datastore.entities(datastore_project, datastore_host) == {}
    text = ordered_events(spark_session, [("o-1", 1, "paid")]).withColumn("at", F.lit("x"))
    with pytest.raises(SinkSchemaError, match=r"sink\.orderColumn 'at' is string"):
        writer.write(text, write_version(3, 1))
    with pytest.raises(SinkSchemaError, match="no column 'when'"):
        DatastoreSink(datastore.target(datastore_project, datastore_host), order="when").write(
            text, write_version(3, 1)
        )


def test_a_late_writer_overtaken_between_its_read_and_its_commit_does_not_win(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    """The fenced driver has read the keys (nothing newer stored yet) when the newer
    driver writes them; the fenced commit then aborts on the conflict, and its retry
    reads the newer versions and leaves them alone."""
    count, newer, older = 400, write_version(9, 3), write_version(9, 2)
    zombie, current = (
        sink(datastore_project, datastore_host),
        sink(datastore_project, datastore_host),
    )
    failures: list[BaseException] = []

    def write_late() -> None:
        try:
            zombie.write(events(spark_session, count, "old"), older)
        except BaseException as err:
            failures.append(err)

    remote.hold(datastore_project, "Commit", count=1)
    late = threading.Thread(target=write_late)
    late.start()
    wait_for(
        lambda: remote.stats(datastore_project)["held"] == {"Commit": 1},
        timeout=120,
        what="the late writer to read the keys and reach its commit",
    )
    current.write(events(spark_session, count, "new"), newer)
    remote.release(datastore_project)
    late.join(timeout=120)

    assert not failures
    assert set(tags(datastore_project, datastore_host).values()) == {("new", newer)}
    assert remote.stats(datastore_project)["failures"] == {"Commit:ABORTED": 1}
    assert (zombie.last.written, zombie.last.skipped, zombie.last.retries) == (0, count, 1)


def test_injected_unavailable_and_aborted_are_retried_and_the_write_succeeds(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    writer = sink(datastore_project, datastore_host)  # probes before the faults
    remote.inject(datastore_project, "Lookup", "UNAVAILABLE", count=2)
    remote.inject(datastore_project, "Commit", "ABORTED", count=2)
    remote.inject(datastore_project, "Commit", "DEADLINE_EXCEEDED", count=1)
    writer.write(events(spark_session, 1_000, "v1"), write_version(1, 1))

    stats = remote.stats(datastore_project)
    assert stats["failures"] == {
        "Lookup:UNAVAILABLE": 2,
        "Commit:ABORTED": 2,
        "Commit:DEADLINE_EXCEEDED": 1,
    }
    assert stats["pending_faults"] == {}
    assert writer.last.retries == 5
    assert writer.last.written == 1_000
    assert len(datastore.entities(datastore_project, datastore_host)) == 1_000


def test_a_commit_whose_reply_is_lost_is_retried_without_duplicates(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    """The commit takes effect, then the call fails: the retry finds our own version
    stored and writes the same entities again."""
    version = write_version(2, 1)
    writer = sink(datastore_project, datastore_host)
    remote.inject(datastore_project, "Commit", "UNAVAILABLE", count=1, when="after")
    writer.write(events(spark_session, 700, "v1"), version)

    assert remote.stats(datastore_project)["failures"] == {"Commit:UNAVAILABLE": 1}
    assert writer.last.retries == 1
    assert writer.last.written == 700  # nothing skipped: equal versions overwrite
    assert set(tags(datastore_project, datastore_host).values()) == {("v1", version)}
    assert len(datastore.entities(datastore_project, datastore_host)) == 700


def test_a_permanent_error_fails_the_batch_at_once_naming_kind_and_project(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    writer = sink(datastore_project, datastore_host)
    remote.inject(datastore_project, "Commit", "PERMISSION_DENIED", count=1)
    with pytest.raises(DatastoreWriteError) as raised:
        writer.write(events(spark_session, 10, "v1"), write_version(1, 1))
    message = str(raised.value)
    assert f"Datastore kind 'Event' in project '{datastore_project}'" in message
    assert "PERMISSION_DENIED" in message
    assert "Cloud Datastore User role" in message
    assert remote.stats(datastore_project)["calls"]["Commit"] == 1  # not retried


def test_transient_errors_past_the_last_attempt_fail_the_batch(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    writer = sink(datastore_project, datastore_host)
    attempts = datastore.FAST.attempts
    remote.inject(datastore_project, "Commit", "UNAVAILABLE", count=attempts)
    with pytest.raises(DatastoreWriteError, match=f"gave up after {attempts} attempts"):
        writer.write(events(spark_session, 10, "v1"), write_version(1, 1))
    assert datastore.entities(datastore_project, datastore_host) == {}


def test_an_entity_over_the_size_limit_fails_with_the_servers_reason(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    frame = events(spark_session, 3, "v1").withColumn(
        "payload", F.expr("repeat('x', 1100000)").cast("binary")
    )
    with pytest.raises(DatastoreWriteError) as raised:
        sink(datastore_project, datastore_host).write(frame, write_version(1, 1))
    message = str(raised.value)
    assert "INVALID_ARGUMENT: entity is too big" in message
    assert "fix the transform's output" in message


def test_more_than_500_rows_are_committed_in_chunks_of_at_most_500(
    spark_session: SparkSession, datastore_host: str, datastore_project: str
) -> None:
    writer = sink(datastore_project, datastore_host)
    writer.write(events(spark_session, 1_234, "v1"), write_version(1, 1))
    # the chunks of a partition commit concurrently, so in any order
    assert sorted(remote.stats(datastore_project)["commit_mutations"]) == [234, 500, 500]

    remote.forget(datastore_project)
    writer.write(events(spark_session, 2_345, "v1", partitions=3), write_version(2, 1))
    sizes = remote.stats(datastore_project)["commit_mutations"]
    assert max(sizes) <= 500
    assert sum(sizes) == 2_345
    assert len(datastore.entities(datastore_project, datastore_host)) == 2_345


def test_the_driver_writes_every_kafka_event_once_into_datastore(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    datastore_host: str,
    datastore_project: str,
    driver: Driver,
) -> None:
    records, partitions = 6_000, 4
    topic = kafka_topic(partitions=partitions)
    factory = EventFactory(seed=41)
    produce(kafka_bootstrap, topic, records, factory=factory)
    pipeline = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        entrypoint="tests.support.datastore:keyed",
        cap=500,
        sink={"datastore": {"project": datastore_project, "kind": datastore.KIND}},
    )
    run = driver.start(pipeline, epoch=1, env={"DATASTORE_EMULATOR_HOST": datastore_host})
    ends = state.end_offsets(kafka_bootstrap, topic, partitions)
    pipeline_id = driver.checkpoint_key
    drain_and_stop(
        run,
        cassandra,
        cassandra_keyspace,
        pipeline_id,
        ends,
        timeout=300,
        what="the driver to commit the topic's end offsets",
    )

    stored = datastore.entities(datastore_project, datastore_host)
    assert len(stored) == records
    for seq in range(records):
        event_id, _, page, action, user_id, event_time = expected.event_row(factory, seq)
        entity = stored[event_id]
        assert (entity["seq"], entity["page"], entity["action"]) == (seq, page, action)
        assert (entity["user_id"], entity["tag"]) == (user_id, "v1")
        assert entity["event_time"].replace(tzinfo=None) == event_time
    batches = run.batches()
    assert sum(b["records"] for b in batches) == records
    versions = {write_version(b["version"], 1) for b in batches if b["records"]}
    assert {e[VERSION_PROPERTY] for e in stored.values()} == versions


def test_a_driver_whose_writes_are_denied_exits_1_naming_datastore_and_commits_nothing(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    datastore_host: str,
    datastore_project: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=2)
    produce(kafka_bootstrap, topic, 200, factory=EventFactory(seed=43))
    remote.inject(datastore_project, "Commit", "PERMISSION_DENIED", count=10)
    pipeline = spec(
        bootstrap=kafka_bootstrap,
        topic=topic,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        entrypoint="tests.support.datastore:keyed",
        sink={"datastore": {"project": datastore_project, "kind": datastore.KIND}},
    )
    run = driver.start(pipeline, epoch=1, env={"DATASTORE_EMULATOR_HOST": datastore_host})
    assert run.wait(240) == 1
    message = run.message()
    assert message["reason"] == "BatchFailed"
    assert f"Datastore kind 'Event' in project '{datastore_project}'" in message["message"]
    assert "PERMISSION_DENIED" in message["message"]
    pipeline_id = driver.checkpoint_key
    assert state.committed(cassandra, cassandra_keyspace, pipeline_id) == {}
    assert datastore.entities(datastore_project, datastore_host) == {}
