"""Producing sample events into Kafka, optionally at a steady rate.

``sluice-dev produce --topic T --rate R --count N`` and the tests use it. The
producer is idempotent with ``acks=all``, so a produced sequence number lands
exactly once; partitions follow the record key.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import KafkaException, Producer

from sluice_dev.events import EventFactory


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    start: int = 0,
    rate: float | None = None,
    factory: EventFactory | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Produce records ``start .. start+count-1``; returns how many were delivered."""
    factory = factory or EventFactory()
    producer, deliveries = idempotent_producer(bootstrap)
    delivered = deliveries.callback

    began = time.monotonic()
    for i in range(count):
        if rate:
            ahead = began + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        key, value = factory.record(start + i)
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        if progress and (i + 1) % 10_000 == 0:
            progress(i + 1)
    deliveries.confirm(producer)
    return count


class Deliveries:
    """Collects delivery failures; ``confirm`` flushes and raises if any record failed."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def callback(self, err: object, _msg: object) -> None:
        if err is not None:
            self.failures.append(str(err))

    def confirm(self, producer: Producer, timeout: float = 60) -> None:
        remaining = producer.flush(timeout)
        if self.failures or remaining:
            raise KafkaException(
                f"{len(self.failures)} failed, {remaining} undelivered: {self.failures[:3]}"
            )


def idempotent_producer(bootstrap: str) -> tuple[Producer, Deliveries]:
    """A producer that lands each record exactly once (idempotent, ``acks=all``)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
        }
    )
    return producer, Deliveries()
