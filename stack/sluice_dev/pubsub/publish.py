"""Publishing sample events to a Pub/Sub topic, optionally at a steady rate.

``sluice-dev produce --pubsub`` and the tests use it: the same events, with the same
``--bad-every`` malformed ones, that :mod:`sluice_dev.produce` writes to Kafka. A
message's data is the Kafka record's value and its ``key`` attribute the record's
key. ``publish`` returns once the server has confirmed every message (the official
client retries transient failures), so a published sequence number exists at
least once; Pub/Sub has no idempotent publish, so a retry after a lost reply may
publish one twice, which is what the Pub/Sub source must cope with anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import google.cloud.pubsub_v1 as pubsub_v1
import grpc
from google.api_core import exceptions
from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

from sluice_dev.events import EventFactory
from sluice_dev.produce import paced

MAX_PENDING = 5_000
"""Messages handed to the client and not yet confirmed; more waits (bounded memory)."""


def message(factory: EventFactory, seq: int) -> tuple[bytes, dict[str, str]]:
    """Data and attributes of event ``seq``: the Kafka record's value, its key as the
    ``key`` attribute (a purely computational function)."""
    key, value = factory.record(seq)
    return value, {"key": key.decode()}


def topic_path(project: str, topic: str) -> str:
    return f"projects/{project}/topics/{topic}"


def subscription_path(project: str, subscription: str) -> str:
    return f"projects/{project}/subscriptions/{subscription}"


def publisher_client(host: str) -> Any:
    """The official publisher, batching, on an insecure channel to ``host`` (as
    ``PUBSUB_EMULATOR_HOST`` would make it)."""
    transport = PublisherGrpcTransport(channel=grpc.insecure_channel(host))
    batching = pubsub_v1.types.BatchSettings(max_messages=500, max_latency=0.01)
    return pubsub_v1.PublisherClient(batch_settings=batching, transport=transport)


def subscriber_client(host: str) -> Any:
    transport = SubscriberGrpcTransport(channel=grpc.insecure_channel(host))
    return pubsub_v1.SubscriberClient(transport=transport)


def ensure_topic(host: str, project: str, topic: str) -> bool:
    """Create the topic if it does not exist; True if created."""
    publisher = publisher_client(host)
    try:
        publisher.create_topic(name=topic_path(project, topic))
    except exceptions.AlreadyExists:
        return False
    finally:
        publisher.stop()
    return True


def ensure_subscription(
    host: str, project: str, topic: str, subscription: str, ack_deadline_seconds: int = 60
) -> bool:
    """Create a pull subscription to the topic if it does not exist; True if created."""
    subscriber = subscriber_client(host)
    try:
        subscriber.create_subscription(
            name=subscription_path(project, subscription),
            topic=topic_path(project, topic),
            ack_deadline_seconds=ack_deadline_seconds,
        )
    except exceptions.AlreadyExists:
        return False
    finally:
        subscriber.close()
    return True


def publish(
    host: str,
    project: str,
    topic: str,
    count: int,
    *,
    start: int = 0,
    rate: float | None = None,
    factory: EventFactory | None = None,
    progress: Callable[[int], None] | None = None,
    progress_every: int = 10_000,
    stop: threading.Event | None = None,
) -> int:
    """Publish events ``start .. start+count-1`` (fewer if ``stop`` is set first);
    returns how many the server confirmed. Raises if any publish failed."""
    factory = factory or EventFactory()
    publisher = publisher_client(host)
    name = topic_path(project, topic)
    pending: list[Future[str]] = []
    sent = 0
    try:
        for i in paced(count, rate, stop, progress, progress_every):
            data, attributes = message(factory, start + i)
            pending.append(publisher.publish(name, data, **attributes))
            if len(pending) >= MAX_PENDING:
                _confirm(pending)
            sent = i + 1
        _confirm(pending)
    finally:
        publisher.stop()
    return sent


def _confirm(pending: list[Future[str]], timeout: float = 120) -> None:
    """Wait for every pending publish; raise naming the first failure."""
    for future in pending:
        future.result(timeout=timeout)
    pending.clear()
