"""The Pub/Sub source's rules: what goes into a batch, what is a repeat, and the
order of spool, plan, write, commit and acknowledgement, with hand-written fakes for
the subscription, the spool and the checkpoint store."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from sluice_api.spec import PipelineSpec
from sluice_job import outages
from sluice_job.checkpoint import Batch, Checkpoint, FencedError
from sluice_job.deadletter import Reject
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_job.ports import PhaseTimes
from sluice_job.pubsub.client import PubSubUnavailableError
from sluice_job.pubsub.deadletter import attributes
from sluice_job.pubsub.leases import Leases
from sluice_job.pubsub.messages import Message, oldest_published, sort_deliveries, take
from sluice_job.pubsub.records import ATTRIBUTES_BUDGET, letter_headers
from sluice_job.pubsub.runner import PubSubRunner

pytestmark = pytest.mark.unit
T0 = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)


def msg(n: int, size: int = 10, ack: str | None = None) -> Message:
    return Message(f"m{n}", b"x" * size, {}, T0 + timedelta(seconds=n), "", ack or f"a{n}")


# -- what goes into a batch ----------------------------------------------------------


def test_a_batch_takes_messages_in_order_up_to_both_caps() -> None:
    held = [msg(i, size=100) for i in range(10)]
    assert [m.message_id for m in take(held, 4, 10_000).batch] == ["m0", "m1", "m2", "m3"]
    by_bytes = take(held, 100, 350)
    assert (len(by_bytes.batch), len(by_bytes.waiting)) == (3, 7)
    assert by_bytes.batch + by_bytes.waiting == tuple(held)


def test_one_message_larger_than_the_byte_cap_still_makes_a_batch() -> None:
    taken = take([msg(0, size=5_000), msg(1)], 100, 1_000)
    assert [m.message_id for m in taken.batch] == ["m0"]


def test_a_message_size_counts_its_attributes_and_ordering_key() -> None:
    m = Message("id", b"12345", {"ab": "cde"}, None, "key")
    assert m.size == 5 + 5 + 3


def test_repeats_are_deliveries_of_committed_held_or_already_seen_messages() -> None:
    deliveries = [msg(1), msg(2), msg(1, ack="a1-again"), msg(3), msg(4)]
    result = sort_deliveries(deliveries, committed={"m3"}, held=["m4"])
    assert [m.message_id for m in result.new] == ["m1", "m2"]
    assert [m.ack_id for m in result.repeats] == ["a1-again", "a3", "a4"]


def test_the_oldest_held_message_is_the_one_published_first() -> None:
    assert oldest_published([msg(5), msg(2)]) == T0 + timedelta(seconds=2)
    assert oldest_published([]) is None


# -- dead letters ---------------------------------------------------------------------


def test_a_dead_letter_names_its_message_and_keeps_its_attributes_within_a_budget() -> None:
    small = Message("42", b"{", {"key": "k-1", "origin": "web"})
    assert letter_headers(small) == (
        ("sluice.pubsub.message.id", "42"),
        ("sluice.pubsub.attribute.key", "k-1"),
        ("sluice.pubsub.attribute.origin", "web"),
    )
    big = Message("43", b"{", {f"a{i:02}": "v" * 100 for i in range(20)})
    headers = dict(letter_headers(big))
    kept = [k for k in headers if k.startswith("sluice.pubsub.attribute.")]
    assert sum(len(k) - len("sluice.pubsub.attribute.") + 100 for k in kept) <= ATTRIBUTES_BUDGET
    assert headers["sluice.pubsub.attributes.truncated"] == "true"


def test_a_pubsub_dead_letter_carries_the_message_attributes_and_the_reason() -> None:
    reject = Reject(
        None,
        b"{not json",
        "sub",
        0,
        7,
        "malformed JSON",
        extra=letter_headers(Message("42", b"{not json", {"key": "k-7"})),
    )
    letter = attributes(reject, "ns/p", 3)
    assert letter["key"] == "k-7"
    assert letter["sluice.pubsub.message.id"] == "42"
    assert letter["sluice.reason"] == "malformed JSON"
    assert (letter["sluice.source.offset"], letter["sluice.batch.id"]) == ("7", "3")
    long_reason = Reject(None, b"", "sub", 0, 1, "é" * 1_000)
    assert len(attributes(long_reason, "ns/p", 1)["sluice.reason"].encode()) <= 1024


# -- the spec -------------------------------------------------------------------------


def spec(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "image": "i",
        "source": {"pubsub": {"project": "my-project", "subscription": "events-sub"}},
        "transform": {"entrypoint": "m:f"},
        "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["c"], "keyspace": "k"}},
    }
    return {**base, **changes}


def test_a_pipeline_reads_exactly_one_source() -> None:
    parsed = PipelineSpec.model_validate(spec())
    assert parsed.source.pubsub is not None
    assert parsed.source.kafka is None
    both = {
        "pubsub": {"project": "my-project", "subscription": "events-sub"},
        "kafka": {"bootstrapServers": "k:9092", "topics": ["t"]},
    }
    for source in (both, {}):
        with pytest.raises(
            ValidationError, match=r"exactly one of source\.kafka or source\.pubsub"
        ):
            PipelineSpec.model_validate(spec(source=source))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"deadLetter": {"kafka": {"topic": "dlq"}}}, "bootstrapServers is required"),
        (
            {"offsetReset": {"id": "r1", "to": "Earliest", "requestedBy": "me"}},
            "offsetReset needs source.kafka",
        ),
    ],
)
def test_kafka_only_settings_are_refused_with_a_pubsub_source(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        PipelineSpec.model_validate(spec(**changes))


def test_a_pubsub_dead_letter_topic_needs_a_pubsub_source() -> None:
    kafka = {"kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}}
    with pytest.raises(ValidationError, match=r"deadLetter\.pubsub needs source\.pubsub"):
        PipelineSpec.model_validate(spec(source=kafka, deadLetter={"pubsub": {"topic": "dlq"}}))


def test_a_pubsub_outage_is_waited_out_as_pubsub() -> None:
    err = PubSubUnavailableError("UNAVAILABLE")
    err.__cause__ = RuntimeError("google.api_core.exceptions.ServiceUnavailable: 503")
    assert outages.dependency_of(err) == outages.PUBSUB


# -- the loop -------------------------------------------------------------------------


@dataclass
class Journal:
    steps: list[str] = field(default_factory=list)


@dataclass
class FakeSubscription:
    journal: Journal
    queue: list[Message]
    acked: list[str] = field(default_factory=list)
    drained: threading.Event = field(default_factory=threading.Event)
    """Set by the first pull that finds nothing."""

    def pull(self, max_messages: int) -> list[Message]:
        taken, self.queue = self.queue[:max_messages], self.queue[max_messages:]
        if not taken:
            self.drained.set()
        self.out.update((m.ack_id, m) for m in taken)
        return taken

    def ack(self, ack_ids: Sequence[str]) -> None:
        self.journal.steps.append(f"ack {len(ack_ids)}")
        self.acked.extend(ack_ids)
        for ack_id in ack_ids:
            self.out.pop(ack_id, None)

    def extend(self, ack_ids: Sequence[str], seconds: int) -> None:
        if seconds == 0:
            self.journal.steps.append(f"give back {len(ack_ids)}")
            self.queue.extend(self.out.pop(a) for a in ack_ids if a in self.out)

    out: dict[str, Message] = field(default_factory=dict)
    """Delivered and not acknowledged: what a lease given back returns to the queue."""


@dataclass
class FakeSpool:
    journal: Journal
    taken: set[str] = field(default_factory=set)
    kept: dict[str, tuple[Message, ...]] = field(default_factory=dict)

    def write(self, batch: Batch, messages: Sequence[Message]) -> None:
        self.journal.steps.append(f"spool {batch.batch_id}")
        self.kept[batch.spool] = tuple(messages)

    def read(self, batch: Batch) -> tuple[Message, ...]:
        return self.kept[batch.spool]

    def drop(self, batch: Batch) -> None:
        self.kept.pop(batch.spool, None)

    def mark(self, batch: Batch, messages: Iterable[Message]) -> None:
        self.journal.steps.append(f"mark {batch.batch_id}")
        self.taken |= {m.message_id for m in messages}

    def committed(self, messages: Iterable[Message]) -> set[str]:
        return self.taken & {m.message_id for m in messages}


@dataclass
class FakeStore:
    journal: Journal
    checkpoint: Checkpoint = field(default_factory=lambda: Checkpoint(0, {}, 0, None, "", False))
    fence_at: int | None = None

    def claim(self, epoch: int) -> Checkpoint:
        return self.checkpoint

    def plan(self, batch: Batch) -> None:
        self.journal.steps.append(f"plan {batch.batch_id}")

    def commit(self, batch: Batch, started_at: datetime) -> float:
        if batch.batch_id == self.fence_at:
            raise FencedError("newer epoch")
        self.journal.steps.append(f"commit {batch.batch_id}")
        return 0.0

    def reset(self, batch: Batch, reset_id: str, record: str) -> None:
        raise AssertionError("no resets on Pub/Sub")

    def release(self) -> bool:
        self.journal.steps.append("release")
        return True


@dataclass
class FakeExecutor:
    journal: Journal
    stop: threading.Event
    subscription: FakeSubscription
    held: dict[int, tuple[Message, ...]] = field(default_factory=dict)

    def hold(self, batch: Batch, messages: Sequence[Message]) -> None:
        self.held[batch.batch_id] = tuple(messages)

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        ids = ",".join(m.message_id for m in self.held[batch.batch_id])
        self.journal.steps.append(f"write {batch.batch_id}: {ids}")
        if not self.subscription.queue:
            self.stop.set()
        return PhaseTimes(0.0, 0.0, 0.0, batch.records)


def loop(
    queue: list[Message],
    *,
    per_batch: int = 2,
    owner: bool = True,
) -> tuple[PubSubRunner, Journal, FakeSubscription, FakeSpool]:
    journal = Journal()
    subscription = FakeSubscription(journal, list(queue))
    spool = FakeSpool(journal)
    stop = threading.Event()
    executor = FakeExecutor(journal, stop, subscription)
    runner = PubSubRunner(
        epoch=2,
        subscription_id="sub",
        max_messages=per_batch,
        max_bytes=1_000_000,
        interval=0.0,
        store=FakeStore(journal),
        spool=spool,
        subscription=subscription,
        leases=Leases(subscription, 60),
        records=executor,
        executor=executor,
        ownership=lambda: owner,
        stop=stop,
        pause=lambda _s: None,
    )
    return runner, journal, subscription, spool


def test_messages_are_spooled_planned_and_marked_before_the_write_and_acked_after_commit() -> None:
    runner, journal, subscription, _ = loop([msg(i) for i in range(4)])
    runner.run()
    assert journal.steps == [
        *("spool 1", "plan 1", "mark 1", "write 1: m0,m1", "commit 1", "ack 2"),
        *("spool 2", "plan 2", "mark 2", "write 2: m2,m3", "commit 2", "ack 2"),
        "release",
    ]
    assert subscription.acked == ["a0", "a1", "a2", "a3"]
    assert runner.progress.positions == {TopicPartition("sub", 0): 4}


def test_a_fenced_driver_acknowledges_nothing() -> None:
    runner, journal, subscription, _ = loop([msg(i) for i in range(4)])
    runner.store = FakeStore(journal, fence_at=2)
    with pytest.raises(FencedError):
        runner.run()
    assert subscription.acked == ["a0", "a1"]  # batch 1's, after its commit; none of 2's
    assert "give back" not in " ".join(journal.steps)  # its leases run out instead


def test_a_redelivered_committed_message_is_dropped_and_acked_with_the_next_commit() -> None:
    runner, journal, subscription, spool = loop([msg(1, ack="again"), msg(5), msg(6)])
    spool.taken.add("m1")  # a committed batch had it
    runner.run()
    assert [s for s in journal.steps if s.startswith("write")] == ["write 1: m5,m6"]
    assert subscription.acked == ["a5", "a6", "again"]


@pytest.mark.parametrize("owner", [True, False])
def test_repeats_alone_are_acked_only_once_the_driver_shows_it_holds_its_epoch(
    owner: bool,
) -> None:
    runner, _, subscription, spool = loop([msg(1, ack="again")], owner=owner)
    spool.taken.add("m1")
    subscription.drained = runner.stop  # stop once the subscription has nothing more
    if owner:
        runner.run()
        assert subscription.acked == ["again"]
    else:
        with pytest.raises(FencedError):
            runner.run()
        assert subscription.acked == []


def test_a_planned_batch_is_recovered_from_the_spool_as_it_was_planned() -> None:
    tp = TopicPartition("sub", 0)
    planned = Batch(4, (OffsetRange(tp, 10, 12),), {tp: 12}, 99, spool="s-4")
    checkpoint = Checkpoint(3, {tp: 10}, 1, None, "", False, planned=planned, version=98)
    runner, journal, subscription, spool = loop([msg(7)])
    runner.store = FakeStore(journal, checkpoint=checkpoint)
    spool.kept["s-4"] = (Message("m2", b"", ack_id=""), Message("m3", b"", ack_id=""))
    runner.run()
    assert journal.steps[:4] == ["mark 4", "write 4: m2,m3", "commit 4", "spool 5"]
    assert runner.progress.positions == {tp: 13}
    assert subscription.acked == ["a7"]


def test_a_batch_frame_has_the_kafka_columns_and_the_message_id_and_attributes() -> None:
    from sluice_job.pubsub.records import SCHEMA, table

    frame = table({7: Message("42", b"v", {"k": "a"}, T0, "ok"), 8: msg(2)}, "sub")
    assert frame.schema.names == SCHEMA.fieldNames()
    rows = frame.to_pylist()
    assert [r["offset"] for r in rows] == [7, 8]
    assert (rows[0]["key"], rows[1]["key"]) == (b"ok", None)
    assert rows[0]["headers"] == [{"key": "k", "value": b"a"}]
    assert rows[0]["attributes"] == [("k", "a")]
    assert rows[0]["message_id"] == "42"


def test_an_id_is_looked_up_where_it_was_marked_whatever_the_delivery() -> None:
    from sluice_job.pubsub.spool import BUCKETS, chunks, partition_of

    first, again = msg(3, ack="a"), msg(3, ack="b")
    assert partition_of(first) == partition_of(again)
    assert 0 <= partition_of(first)[1] < BUCKETS
    # Unlogged batches stay under Cassandra's batch size limit, rows in order.
    large = chunks([(i,) for i in range(10)], lambda _row: 12_000)
    assert [len(run) for run in large] == [2, 2, 2, 2, 2]
    assert [row for run in large for row in run] == [(i,) for i in range(10)]
    assert [len(run) for run in chunks([(i,) for i in range(100)], lambda _row: 10)] == [64, 36]
    assert [len(run) for run in chunks([(1,), (2,)], lambda _row: 99_999)] == [1, 1]


@dataclass
class SteadyStream(FakeSubscription):
    """A stream slower than the cap: each pull finds one new message, 0.1 s after the
    last (``now``, the runner's clock)."""

    now: float = 0.0

    def pull(self, max_messages: int) -> list[Message]:
        self.now += 0.1
        return super().pull(min(max_messages, 1))


def test_a_steady_stream_below_the_cap_makes_a_batch_each_interval_not_once_the_cap_fills() -> None:
    """With 10 messages a second and a cap of 1,000, a batch that waited for the cap
    would hold its first message back 100 s, far beyond the 1 s trigger interval."""
    journal = Journal()
    stream = SteadyStream(journal, [msg(i) for i in range(1_000)])
    stop = threading.Event()

    class OneBatch(FakeExecutor):
        def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
            stop.set()  # then the runner gives back what it holds and stops
            return super().execute(batch, epoch)

    executor = OneBatch(journal, stop, stream)
    runner = PubSubRunner(
        epoch=2,
        subscription_id="sub",
        max_messages=1_000,
        max_bytes=1_000_000,
        interval=1.0,
        store=FakeStore(journal),
        spool=FakeSpool(journal),
        subscription=stream,
        leases=Leases(stream, 60),
        records=executor,
        executor=executor,
        ownership=lambda: True,
        stop=stop,
        pause=lambda _s: None,
        clock=lambda: stream.now,
    )
    runner.run()
    (written,) = [s for s in journal.steps if s.startswith("write")]
    taken = written.split(": ")[1].split(",")
    assert taken == [f"m{i}" for i in range(len(taken))]
    assert len(taken) <= 11, f"the first batch waited for {len(taken)} messages"
    assert stream.now <= 1.2, f"it was written after {stream.now:.1f}s of pulling"


def test_deliveries_pulled_into_an_outage_are_given_back_not_held_forever() -> None:
    runner, journal, subscription, spool = loop([msg(i) for i in range(4)])
    lookups = spool.committed

    def cassandra_away_once(messages: Iterable[Message]) -> set[str]:
        if "outage" not in journal.steps:
            journal.steps.append("outage")
            raise PubSubUnavailableError("the ids record is away")
        return lookups(messages)

    spool.committed = cassandra_away_once  # type: ignore[method-assign]
    runner.run()
    assert journal.steps[:2] == ["outage", "give back 2"]
    assert sorted(subscription.acked) == ["a0", "a1", "a2", "a3"]
    assert runner.leases.held == 0
