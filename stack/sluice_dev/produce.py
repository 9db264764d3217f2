"""Producing sample events into Kafka, optionally at a steady rate.

``sluice-dev produce --topic T --rate R --count N`` and the tests use it. The
producer is idempotent with ``acks=all``, so a produced sequence number lands
exactly once; partitions follow the record key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

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
    progress_every: int = 10_000,
    stop: threading.Event | None = None,
) -> int:
    """Produce records ``start .. start+count-1``, or fewer if ``stop`` is set first
    (then ``start .. start+n-1``); returns how many were delivered."""
    factory = factory or EventFactory()
    producer, deliveries = idempotent_producer(bootstrap)
    delivered = deliveries.callback
    sent = 0
    for i in paced(count, rate, stop, progress, progress_every):
        key, value = factory.record(start + i)
        send(producer, topic, key, value, delivered)
        producer.poll(0)
        sent = i + 1
    deliveries.confirm(producer)
    return sent


def paced(
    count: int,
    rate: float | None,
    stop: threading.Event | None,
    progress: Callable[[int], None] | None,
    progress_every: int,
) -> Iterator[int]:
    """The indices ``0 .. count-1``, at most ``rate`` per second from the first, until
    ``stop`` is set; ``progress(n)`` after every ``progress_every``-th one is handled.
    One pacing for every transport (Kafka here, Pub/Sub in ``sluice_dev.pubsub``)."""
    began = time.monotonic()
    for i in range(count):
        if stop is not None and stop.is_set():
            return
        if rate:
            ahead = began + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        yield i
        if progress and (i + 1) % progress_every == 0:
            progress(i + 1)


def send(
    producer: Producer,
    topic: str,
    key: bytes,
    value: bytes,
    delivered: Callable[[object, object], None],
) -> None:
    """Hand one record to the producer, waiting for room while its queue is full."""
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=delivered)
            return
        except BufferError:
            producer.poll(0.05)


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


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30) -> bool:
    """Create ``topic`` with ``partitions`` if it does not exist; True if created."""
    # NewTopic is missing from the package's stubs, not from the package.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=timeout).topics:
        return False
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1)
    admin.create_topics([new], operation_timeout=timeout)[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        leaders = [p.leader for p in found.partitions.values()] if found else []
        if len(leaders) == partitions and all(leader >= 0 for leader in leaders):
            return True
        time.sleep(0.2)
    raise KafkaException(f"topic {topic} has no leader for every partition after {timeout}s")


class Background:
    """``count`` events (``start .. start+count-1``) at ``rate`` per second, produced in
    a thread: the steady stream of the demo and the end-to-end tests. ``produced``
    moves every 100 events; ``stop`` ends the stream early (events ``start ..
    start+produced-1`` then exist, once)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        count: int,
        rate: float,
        factory: EventFactory,
        *,
        start: int = 0,
    ) -> None:
        self.bootstrap, self.topic, self.count, self.rate = bootstrap, topic, count, rate
        self.factory, self.start_at = factory, start
        self.produced = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> Background:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()

    def wait(self, timeout: float | None = None) -> int:
        """Until every event is delivered; raises if the producer failed or is late."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"still producing to {self.topic} after {timeout}s")
        if self.error is not None:
            raise KafkaException(f"producing to {self.topic} failed: {self.error}")
        return self.produced

    def _run(self) -> None:
        def progress(done: int) -> None:
            self.produced = done

        try:
            self.produced = produce(
                self.bootstrap,
                self.topic,
                self.count,
                start=self.start_at,
                rate=self.rate,
                factory=self.factory,
                progress=progress,
                progress_every=100,
                stop=self._stop,
            )
        except BaseException as err:  # raised again by wait()
            self.error = err
