"""Dead letters end to end: the real driver, the example transform, records of which
5% are malformed. What a user checks: every bad record is in the dead-letter topic,
unchanged, with the reason and where it came from; every good one is in the sink;
the pipeline kept going and stopped cleanly."""

from __future__ import annotations

import random
from typing import Any

import pytest
from confluent_kafka import Producer

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import expected, state
from tests.support.driver import Driver, drain_and_stop, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 4


def test_every_bad_record_is_a_dead_letter_with_its_reason_and_every_good_one_is_written(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    records = 4_000
    factory = EventFactory(seed=11, bad_every=20)
    topic, dead_letter_topic = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=2)
    produce(kafka_bootstrap, topic, records, factory=factory)
    pipeline_id = driver.pipeline_id  # the dead letters' header: no cluster id
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap,
            topic=topic,
            contact=cassandra_contact,
            keyspace=events_table,
            entrypoint="sluice_job.examples.events:transform",
            cap=400,
            deadLetter={"kafka": {"topic": dead_letter_topic}},
        ),
        epoch=1,
    )
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    drain_and_stop(
        run,
        cassandra,
        events_table,
        driver.checkpoint_key,
        ends,
        timeout=300,
        what="the driver to commit the end offsets",
    )

    source = {(r.partition, r.offset): r for r in state.read_topic(kafka_bootstrap, topic)}
    bad = {at for at, r in source.items() if expected.reject_reason(r.value) is not None}
    assert len(bad) == records // 20
    letters = state.read_topic(kafka_bootstrap, dead_letter_topic)
    positions = [
        (int(m.headers["sluice.source.partition"]), int(m.headers["sluice.source.offset"]))
        for m in letters
    ]
    assert sorted(positions) == sorted(bad)  # each bad record once, nothing else
    for letter, at in zip(letters, positions, strict=True):
        original = source[at]
        assert (letter.key, letter.value) == (original.key, original.value)
        assert letter.headers["sluice.source.topic"] == topic
        assert letter.headers["sluice.reason"] == expected.reject_reason(original.value)
        assert letter.headers["sluice.pipeline"] == pipeline_id
    reasons = {m.headers["sluice.reason"] for m in letters}
    assert reasons == {
        "malformed JSON",
        "missing field page",
        "wrong type of ts: expected integer, got string",
    }

    rows = state.events(cassandra, events_table)
    good = [seq for seq in range(records) if not factory.is_bad(seq)]
    assert len(rows) == len(good)
    for seq in good:
        row = rows[f"e-{factory.seed}-{seq}"]
        assert (row.event_id, row.seq, row.page, row.action, row.user_id, row.event_time) == (
            expected.event_row(factory, seq)
        )
    batches = run.batches()
    assert sum(b["rejected"] for b in batches) == len(bad)
    assert sum(b["records_out"] for b in batches) == len(good)


def test_rejects_without_a_dead_letter_topic_stop_the_pipeline_before_its_commit(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    topic = kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, 30, factory=EventFactory(seed=12, bad_every=20))
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap,
            topic=topic,
            contact=cassandra_contact,
            keyspace=events_table,
            entrypoint="sluice_job.examples.events:transform",
        ),
        epoch=1,
    )
    assert run.wait(300) == 1
    message = run.message()
    assert message["reason"] == "RejectedWithoutDeadLetter"
    assert f"{topic}/0@19: malformed JSON" in message["message"]
    assert "spec.deadLetter" in message["message"]
    assert state.committed(cassandra, events_table, driver.checkpoint_key) == {}
    assert state.events(cassandra, events_table) == {}  # it failed before the sink write


def test_a_missing_dead_letter_topic_stops_the_driver_at_start_naming_it(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    events_table: str,
    driver: Driver,
) -> None:
    missing = f"no-such-dlq-{driver.pipeline}"
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap,
            topic=kafka_topic(partitions=1),
            contact=cassandra_contact,
            keyspace=events_table,
            deadLetter={"kafka": {"topic": missing}},
        ),
        epoch=1,
    )
    assert run.wait(120) == 1
    message = run.message()
    assert message["reason"] == "DeadLetterUnavailable"
    assert repr(missing) in message["message"]
    assert "create it" in message["message"]


def test_a_record_larger_than_the_dead_letter_topic_takes_lands_there_cut_and_the_pipeline_moves_on(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> None:
    """Before: the letter of a 200 kB record failed with MSG_SIZE_TOO_LARGE at every
    attempt, so the batch never committed and the pipeline stood still."""
    topic = kafka_topic(partitions=1)
    dead_letter_topic = kafka_topic(partitions=1, **{"max.message.bytes": "20000"})
    factory = EventFactory(seed=13)
    produce(kafka_bootstrap, topic, 10, factory=factory)
    # Malformed JSON, ten times what a letter may be, and incompressible (the broker
    # checks the compressed batch: 200 kB of one byte would fit).
    huge = b"{" + random.Random(13).randbytes(200_000)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, value=huge, key=b"huge-1")
    producer.flush(30)
    produce(kafka_bootstrap, topic, 10, factory=EventFactory(seed=14))
    run = driver.start(
        spec(
            bootstrap=kafka_bootstrap,
            topic=topic,
            contact=cassandra_contact,
            keyspace=events_table,
            entrypoint="sluice_job.examples.events:transform",
            deadLetter={"kafka": {"topic": dead_letter_topic}},
        ),
        epoch=1,
    )
    ends = state.end_offsets(kafka_bootstrap, topic, 1)
    drain_and_stop(
        run,
        cassandra,
        events_table,
        driver.checkpoint_key,
        ends,
        timeout=300,
        what="the end offsets",
    )

    (letter,) = state.read_topic(kafka_bootstrap, dead_letter_topic)
    assert letter.key == b"huge-1"
    assert 0 < len(letter.value or b"") < 20_000
    assert huge.startswith(letter.value or b"-")
    assert letter.headers["sluice.truncated"] == "true"
    assert letter.headers["sluice.value.size"] == str(len(huge))
    assert letter.headers["sluice.key.size"] == "6"
    assert letter.headers["sluice.source.offset"] == "10"
    assert letter.headers["sluice.reason"] == "malformed JSON"
    assert len(state.events(cassandra, events_table)) == 20
