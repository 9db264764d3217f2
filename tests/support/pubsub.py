"""A test's own project on the stack's Pub/Sub server, through the official client.

The ``pubsub`` fixture hands one to each test: a unique project (so its fault
switches and counters are its own), the client pointed at the server exactly as a
user points it at an emulator (``PUBSUB_EMULATOR_HOST``), and helpers to make
topics and subscriptions, publish, pull and flip the switches.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from google.cloud import pubsub_v1

from sluice_dev.events import EventFactory
from sluice_dev.pubsub import publish, remote
from sluice_dev.pubsub.publish import message
from tests.support.waiting import wait_for


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message, as the client saw it."""

    message_id: str
    data: bytes
    ack_id: str
    delivery_attempt: int | None
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class Deliveries:
    """Every delivery seen by a pull loop, in order."""

    seen: list[Delivery] = field(default_factory=list)

    def of(self, message_id: str) -> list[Delivery]:
        return [d for d in self.seen if d.message_id == message_id]

    def count(self, message_id: str) -> int:
        return len(self.of(message_id))


class PubSub:
    """One test's project: ``topic()``, ``subscription(topic)``, ``publish``,
    ``pull_until``, and the fault switches (``faults``, ``redeliver``, ``stats``)."""

    def __init__(self, host: str, project: str) -> None:
        self.host, self.project = host, project
        self.publisher = pubsub_v1.PublisherClient()
        self.subscriber = pubsub_v1.SubscriberClient()

    def close(self) -> None:
        self.publisher.stop()
        self.subscriber.close()

    def topic(self) -> str:
        path = f"projects/{self.project}/topics/t-{uuid.uuid4().hex[:8]}"
        self.publisher.create_topic(name=path)
        return path

    def subscription(
        self,
        topic: str,
        *,
        ack_deadline_seconds: int = 10,
        max_delivery_attempts: int | None = None,
    ) -> str:
        """A pull subscription; with ``max_delivery_attempts`` it has a dead-letter
        policy (to a topic of its own), and so the server reports delivery attempts."""
        path = f"projects/{self.project}/subscriptions/s-{uuid.uuid4().hex[:8]}"
        request: dict[str, Any] = {
            "name": path,
            "topic": topic,
            "ack_deadline_seconds": ack_deadline_seconds,
        }
        if max_delivery_attempts is not None:
            request["dead_letter_policy"] = {
                "dead_letter_topic": self.topic(),
                "max_delivery_attempts": max_delivery_attempts,
            }
        self.subscriber.create_subscription(request=request)
        return path

    def publish(self, topic: str, *datas: bytes) -> list[str]:
        """Publish each payload; returns the message IDs the server assigned."""
        futures = [self.publisher.publish(topic, data) for data in datas]
        return [future.result(timeout=30) for future in futures]

    def publish_events(
        self, topic: str, factory: EventFactory, seqs: Iterable[int]
    ) -> dict[int, str]:
        """Publish events as ``sluice-dev produce --pubsub`` does (data and the ``key``
        attribute); returns the message ID the server assigned to each seq."""
        futures = {}
        for seq in seqs:
            data, attributes = message(factory, seq)
            futures[seq] = self.publisher.publish(topic, data, **attributes)
        return {seq: future.result(timeout=60) for seq, future in futures.items()}

    def pull_until(
        self,
        subscription: str,
        done: Callable[[Deliveries], bool],
        *,
        timeout: float = 30,
        what: str,
        ack: Callable[[Delivery], bool] = lambda _d: False,
    ) -> Deliveries:
        """Unary pulls until ``done(deliveries)``; acknowledges what ``ack`` picks."""
        deliveries = Deliveries()

        def pulled_enough() -> bool:
            response = self.subscriber.pull(subscription=subscription, max_messages=100, timeout=10)
            for received in response.received_messages:
                delivery = Delivery(
                    received.message.message_id,
                    received.message.data,
                    received.ack_id,
                    received.delivery_attempt or None,
                    dict(received.message.attributes),
                )
                deliveries.seen.append(delivery)
                if ack(delivery):
                    self.subscriber.acknowledge(
                        subscription=subscription, ack_ids=[delivery.ack_id]
                    )
            return done(deliveries)

        wait_for(pulled_enough, timeout=timeout, what=what, interval=0.05)
        return deliveries

    def faults(self, **switches: Any) -> dict[str, Any]:
        return remote.set_faults(self.project, **switches)

    def redeliver(self, subscription: str | None = None) -> int:
        return remote.redeliver(self.project, _short(subscription) if subscription else None)

    def stats(self, subscription: str) -> dict[str, int]:
        return remote.subscription_stats(self.project, _short(subscription))

    def refused(self) -> dict[str, int]:
        result: dict[str, int] = remote.stats(self.project)["refused"]
        return result


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


class Publishing:
    """``sluice-dev produce --pubsub`` in the background, ``rate`` a second, until stopped."""

    def __init__(self, pubsub: PubSub, topic: str, factory: EventFactory, *, rate: float) -> None:
        self.stop = threading.Event()
        self.published: int | None = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.published = publish.publish(
                    pubsub.host,
                    pubsub.project,
                    topic.rsplit("/", 1)[-1],
                    1_000_000,
                    rate=rate,
                    factory=factory,
                    stop=self.stop,
                )
            except BaseException as err:
                self.error = err

        self.thread = threading.Thread(target=run, name="publishing", daemon=True)
        self.thread.start()

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    def finish(self) -> int:
        """Stop publishing; how many messages the server confirmed (seq 0..n-1)."""
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "publishing did not stop"
        assert self.error is None, f"publishing failed: {self.error!r}"
        assert self.published is not None
        return self.published
