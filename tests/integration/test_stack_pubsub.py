"""The stack's Pub/Sub server (Google's pstest behind fault switches) does what the
Pub/Sub source will rely on, seen through the official client pointed at it by
``PUBSUB_EMULATOR_HOST``: streaming pull, acks that hold, redelivery after an ack
deadline with the delivery attempt the API reports, lease extension, each fault
switch and its undoing, and ``sluice-dev produce --pubsub``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core import exceptions

from sluice_dev import cli
from sluice_dev.events import EventFactory
from sluice_dev.pubsub import remote
from tests.support.pubsub import PubSub
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


class Streamed:
    """A streaming pull (``subscriber.subscribe``) recording every delivery;
    acknowledges each message when ``ack`` is set."""

    def __init__(self, pubsub: PubSub, subscription: str, *, ack: bool) -> None:
        self.lock = threading.Lock()
        self.messages: list[Any] = []
        self.ack = ack
        self.future = pubsub.subscriber.subscribe(subscription, self._received)

    def _received(self, message: Any) -> None:
        with self.lock:
            self.messages.append(message)
        if self.ack:
            message.ack()

    def ids(self) -> list[str]:
        with self.lock:
            return [m.message_id for m in self.messages]

    def stop(self) -> None:
        self.future.cancel()
        self.future.result(timeout=30)


@pytest.fixture
def streams(pubsub: PubSub) -> Iterator[list[Streamed]]:
    opened: list[Streamed] = []
    yield opened
    for stream in opened:
        stream.stop()


def test_a_streaming_pull_delivers_every_message_once_and_the_acks_hold(
    pubsub: PubSub, streams: list[Streamed]
) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    payloads = [f"m{i}".encode() for i in range(50)]
    ids = pubsub.publish(topic, *payloads)
    streams.append(stream := Streamed(pubsub, subscription, ack=True))

    wait_for(lambda: len(stream.ids()) >= 50, timeout=30, what="50 messages streamed")
    assert sorted(stream.ids()) == sorted(ids)
    assert sorted(m.data for m in stream.messages) == sorted(payloads)
    counters = wait_for(
        lambda: (s := pubsub.stats(subscription))["acked"] == 50 and s,
        timeout=30,
        what="the server to count 50 acks",
    )
    assert counters["unacked"] == 0
    assert counters["redelivered"] == 0
    assert pubsub.redeliver(subscription) == 0  # no lease left to expire


def test_an_unacked_message_comes_back_after_its_deadline_and_an_acked_one_does_not(
    pubsub: PubSub,
) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic, ack_deadline_seconds=1, max_delivery_attempts=10)
    acked, kept = pubsub.publish(topic, b"acked", b"kept")

    # The first delivery of both; only `acked` is acknowledged. Then `kept` must come
    # back (its 1 s deadline passed); `acked`, with the same deadline, must not.
    seen = pubsub.pull_until(
        subscription,
        lambda d: d.count(kept) >= 3,
        what="the unacked message delivered three times",
        ack=lambda d: d.message_id == acked,
    )
    assert seen.count(acked) == 1
    first, second, third = seen.of(kept)
    assert [first.delivery_attempt, second.delivery_attempt, third.delivery_attempt] == [1, 2, 3]
    assert len({first.ack_id, second.ack_id, third.ack_id}) == 3  # a new lease each time
    assert seen.of(acked)[0].delivery_attempt == 1

    counters = pubsub.stats(subscription)
    assert counters["redelivered"] >= 2
    assert counters["acked"] == 1


def test_without_a_dead_letter_policy_no_delivery_attempt_is_reported(pubsub: PubSub) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic, ack_deadline_seconds=1)
    (only,) = pubsub.publish(topic, b"x")
    seen = pubsub.pull_until(subscription, lambda d: d.count(only) >= 2, what="a redelivery")
    assert [d.delivery_attempt for d in seen.of(only)] == [None, None]  # as the API does


def test_modify_ack_deadline_extends_a_lease(pubsub: PubSub) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic, ack_deadline_seconds=1)
    extended, control = pubsub.publish(topic, b"extended", b"control")
    extend_once = _extender(pubsub, subscription, extended)

    # `control` has the same 1 s deadline; it comes back twice (2 s and more) while
    # `extended`, whose lease was extended to 60 s at once, stays leased.
    seen = pubsub.pull_until(
        subscription,
        lambda d: d.count(control) >= 3,
        what="the control message delivered three times",
        ack=extend_once,
    )
    assert seen.count(extended) == 1
    assert pubsub.stats(subscription)["modacks"] == 1


def test_drop_acks_answers_ok_but_the_message_comes_back_until_switched_off(
    pubsub: PubSub,
) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic, ack_deadline_seconds=1, max_delivery_attempts=10)
    (only,) = pubsub.publish(topic, b"x")
    pubsub.faults(drop_acks=True)

    seen = pubsub.pull_until(
        subscription, lambda d: d.count(only) >= 2, what="a redelivery despite the ack", ack=_all
    )
    assert [d.delivery_attempt for d in seen.of(only)] == [1, 2]
    assert pubsub.stats(subscription)["acks_dropped"] == 2
    assert pubsub.stats(subscription)["acked"] == 0

    pubsub.faults(drop_acks=False)
    (control,) = pubsub.publish(topic, b"control")
    seen = pubsub.pull_until(
        subscription,
        lambda d: d.count(control) >= 2 and d.count(only) >= 1,
        what="the control message redelivered",
        ack=lambda d: d.message_id == only,
    )
    assert seen.count(only) == 1  # acked for good this time
    assert pubsub.stats(subscription)["acked"] == 1


def test_drop_modacks_lets_a_lease_expire_despite_the_extension(pubsub: PubSub) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic, ack_deadline_seconds=1)
    (only,) = pubsub.publish(topic, b"x")
    pubsub.faults(drop_modacks=True)

    seen = pubsub.pull_until(
        subscription,
        lambda d: d.count(only) >= 2,
        what="a redelivery despite the extension",
        ack=_extender(pubsub, subscription, only),
    )
    assert seen.count(only) == 2
    assert pubsub.stats(subscription)["modacks_dropped"] == 1

    pubsub.faults(drop_modacks=False)
    (control,) = pubsub.publish(topic, b"control")
    seen = pubsub.pull_until(
        subscription,
        lambda d: d.count(control) >= 3,
        what="the control message delivered three times",
        ack=_extender(pubsub, subscription, only),
    )
    assert seen.count(only) == 1  # extended for good this time (it was due again)
    assert pubsub.stats(subscription)["modacks"] == 1


def test_redeliver_expires_every_lease_of_a_streaming_pull_at_once(
    pubsub: PubSub, streams: list[Streamed]
) -> None:
    topic = pubsub.topic()
    # A 10-minute deadline: without the switch nothing would come back in this test.
    subscription = pubsub.subscription(topic, ack_deadline_seconds=600, max_delivery_attempts=5)
    ids = pubsub.publish(topic, b"a", b"b", b"c")
    streams.append(stream := Streamed(pubsub, subscription, ack=False))
    wait_for(lambda: len(stream.ids()) == 3, timeout=30, what="3 messages streamed")

    assert pubsub.redeliver() == 3
    wait_for(lambda: len(stream.ids()) == 6, timeout=30, what="3 messages streamed again")
    assert sorted(stream.ids()) == sorted(ids * 2)
    attempts = sorted(m.delivery_attempt for m in stream.messages)
    assert attempts == [1, 1, 1, 2, 2, 2]
    counters = pubsub.stats(subscription)
    assert (counters["expired"], counters["redelivered"], counters["unacked"]) == (3, 3, 3)


def test_unavailable_refuses_every_call_of_the_project_until_switched_off(
    pubsub: PubSub, streams: list[Streamed], pubsub_host: str
) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    streams.append(stream := Streamed(pubsub, subscription, ack=True))
    pubsub.publish(topic, b"before")
    wait_for(lambda: pubsub.stats(subscription)["acked"] == 1, timeout=30, what="the first ack")

    pubsub.faults(unavailable=True)
    with pytest.raises(exceptions.ServiceUnavailable):
        pubsub.publisher.get_topic(topic=topic, retry=None)
    with pytest.raises(exceptions.ServiceUnavailable):
        pubsub.subscriber.pull(subscription=subscription, max_messages=1, retry=None)
    # The open stream was cut, and the client's reconnections are refused.
    wait_for(
        lambda: pubsub.refused().get("StreamingPull:Unavailable", 0) >= 1,
        timeout=30,
        what="the streaming pull refused",
    )
    other = PubSub(pubsub_host, f"{pubsub.project}-other")
    try:
        other.topic()  # another project's calls are served
    finally:
        other.close()
        remote.forget(other.project)

    pubsub.faults(unavailable=False)
    pubsub.publish(topic, b"after")
    # The client reopens a stream at most 5 times in 10 s (api_core's bidi throttle);
    # if it spent those on the refusals, it resumes up to 10 s after the cut.
    wait_for(lambda: len(stream.ids()) == 2, timeout=60, what="the stream to resume")
    assert sorted(m.data for m in stream.messages) == [b"after", b"before"]


def test_a_failing_method_fails_with_its_code_and_the_rest_works(pubsub: PubSub) -> None:
    topic = pubsub.topic()
    subscription = pubsub.subscription(topic)
    (only,) = pubsub.publish(topic, b"x")
    pubsub.faults(fail={"Acknowledge": "INTERNAL"})

    response = pubsub.subscriber.pull(subscription=subscription, max_messages=1, timeout=10)
    (received,) = response.received_messages
    assert received.message.message_id == only
    with pytest.raises(exceptions.InternalServerError):
        pubsub.subscriber.acknowledge(
            subscription=subscription, ack_ids=[received.ack_id], retry=None
        )
    assert pubsub.refused() == {"Acknowledge:Internal": 1}

    pubsub.faults(fail={})
    pubsub.subscriber.acknowledge(subscription=subscription, ack_ids=[received.ack_id])
    assert pubsub.stats(subscription)["acked"] == 1


@pytest.mark.parametrize(
    ("switches", "named"),
    [
        ({"fail": {"Acknowlege": "INTERNAL"}}, "Acknowlege"),
        ({"fail": {"Acknowledge": "BROKEN"}}, "BROKEN"),
    ],
)
def test_a_bad_switch_is_refused_naming_what_is_wrong(
    pubsub: PubSub, switches: dict[str, Any], named: str
) -> None:
    with pytest.raises(RuntimeError, match=named):
        pubsub.faults(**switches)
    assert remote.stats(pubsub.project)["faults"]["fail"] == {}


def test_produce_publishes_exactly_the_events_with_the_bad_ones(pubsub: PubSub) -> None:
    topic, subscription = "events", "events-sub"
    argv = ["produce", "--pubsub", "--project", pubsub.project, "--pubsub-host", pubsub.host]
    argv += ["--topic", topic, "--subscription", subscription, "--count", "300"]
    assert cli.main([*argv, "--start", "1000", "--bad-every", "10"]) == 0

    path = f"projects/{pubsub.project}/subscriptions/{subscription}"
    messages: list[Any] = []

    def pulled_all() -> bool:
        response = pubsub.subscriber.pull(subscription=path, max_messages=1000, timeout=10)
        messages.extend(m.message for m in response.received_messages)
        if response.received_messages:
            ack_ids = [m.ack_id for m in response.received_messages]
            pubsub.subscriber.acknowledge(subscription=path, ack_ids=ack_ids)
        return len(messages) >= 300

    wait_for(pulled_all, timeout=60, what="300 events pulled")
    factory = EventFactory(bad_every=10)
    expected = {factory.record(seq) for seq in range(1000, 1300)}
    assert {(m.attributes["key"].encode(), m.data) for m in messages} == expected
    assert len(messages) == 300  # each once
    assert sum(1 for key, _value in expected if factory.is_bad(int(key[2:]))) == 30


def test_produce_names_the_missing_server(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["produce", "--pubsub", "--pubsub-host", "127.0.0.1:1", "--topic", "t", "--count", "1"]
    assert cli.main(argv) == 1
    assert "no Pub/Sub server at 127.0.0.1:1" in capsys.readouterr().err


def _all(_delivery: Any) -> bool:
    return True


def _extender(pubsub: PubSub, subscription: str, message_id: str) -> Any:
    """An ``ack`` hook that extends the first delivery of ``message_id`` to 60 s."""
    done: list[str] = []

    def extend(delivery: Any) -> bool:
        if delivery.message_id == message_id and not done:
            pubsub.subscriber.modify_ack_deadline(
                subscription=subscription, ack_ids=[delivery.ack_id], ack_deadline_seconds=60
            )
            done.append(delivery.ack_id)
        return False

    return extend
