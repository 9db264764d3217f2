"""The latency phase's instruments: a paced producer and a Cassandra visibility poller.

The producer sends events at a steady rate (in small bursts every few milliseconds,
with the same idempotent ``acks=all`` settings as ``sluice_dev.produce``). Each
event's ``ts`` is its produce time (milliseconds since the epoch), so the sink row's
``event_time`` says when it entered Kafka. Every ``sample_every``-th event produced
after the warm-up is a probe: its monotonic produce time (taken just before the
record goes to the producer) is handed to the poller.

The poller asks Cassandra, every ``interval`` seconds, which pending probes have a
row (``SELECT event_id ... WHERE event_id IN ?``, oldest first, at most
``max_probes`` per round). A probe's latency is the time the SELECT that first
returned its row came back minus its produce time: an upper bound, at most one
interval plus one round trip late.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cassandra.cluster import Session

from sluice_dev.events import EventFactory
from sluice_dev.produce import idempotent_producer, send

CHUNK = 100
"""Probes per ``IN`` query."""


@dataclass
class Poller:
    """Finds when probe rows become visible; runs in its own thread."""

    session: Session
    keyspace: str
    table: str
    interval: float
    max_probes: int = 2000
    pending: dict[str, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    rounds: int = 0
    errors: int = 0
    """Rounds cut short by a failed query (retried next round; a timed-out read
    under load must not end the measurement)."""
    seconds: float = 0.0
    """How long the poller ran: ``seconds / rounds`` is the real poll period."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def watch(self, event_id: str, produced: float) -> None:
        with self._lock:
            self.pending[event_id] = produced

    def start(self) -> None:
        statement = self.session.prepare(
            f"SELECT event_id FROM {self.keyspace}.{self.table} WHERE event_id IN ?"
        )
        self._thread = threading.Thread(target=self._loop, args=(statement,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self.pending)

    def _loop(self, statement: object) -> None:
        began = time.monotonic()
        while not self._stop.is_set():
            round_began = time.monotonic()
            try:
                self._round(statement)
            except Exception:
                self.errors += 1
            self.rounds += 1
            self.seconds = time.monotonic() - began
            self._stop.wait(max(0.0, round_began + self.interval - time.monotonic()))

    def _round(self, statement: object) -> None:
        with self._lock:
            ids = list(self.pending)[: self.max_probes]
        for start in range(0, len(ids), CHUNK):
            rows = self.session.execute(statement, (ids[start : start + CHUNK],), timeout=10)
            seen = time.monotonic()
            with self._lock:
                for row in rows:
                    produced = self.pending.pop(row.event_id, None)
                    if produced is not None:
                        self.latencies.append(seen - produced)


@dataclass(frozen=True)
class Pace:
    """How the latency phase produces: ``rate`` events/s for ``warmup + seconds``."""

    rate: float
    seconds: float
    warmup: float
    sample_every: int

    @property
    def total(self) -> int:
        return int(self.rate * (self.warmup + self.seconds))

    @property
    def warmup_count(self) -> int:
        return int(self.rate * self.warmup)


@dataclass(frozen=True)
class Produced:
    events: int
    probes: int
    seconds: float
    ended: float = 0.0
    """When the last event was handed to the producer (epoch seconds)."""

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


def produce_paced(
    bootstrap: str,
    topic: str,
    pace: Pace,
    factory: EventFactory,
    on_probe: Callable[[str, float], None],
) -> Produced:
    """Produce ``pace.total`` events at ``pace.rate``; probes go to ``on_probe``."""
    producer, deliveries = idempotent_producer(bootstrap)
    delivered = deliveries.callback
    began, sent, probes = time.monotonic(), 0, 0
    while sent < pace.total:
        due = min(pace.total, int((time.monotonic() - began) * pace.rate) + 1)
        for seq in range(sent, due):
            event = factory.event(seq)
            event["ts"] = int(time.time() * 1000)
            probe = seq >= pace.warmup_count and seq % pace.sample_every == 0
            if probe:
                probes += 1
                on_probe(str(event["event_id"]), time.monotonic())
            send(producer, topic, f"k-{seq}".encode(), json.dumps(event).encode(), delivered)
        sent = due
        producer.poll(0)
        time.sleep(0.002)
    elapsed, ended = time.monotonic() - began, time.time()
    deliveries.confirm(producer)
    return Produced(sent, probes, elapsed, ended)
