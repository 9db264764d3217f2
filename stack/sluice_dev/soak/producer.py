"""The soak's transactional producer: sequence-numbered events (5 % malformed by
default), in transactions of which a seeded 10 % are aborted, at a steady rate, in a
background thread that survives broker restarts.

It produces ``count`` events, and goes on at the same rate while the soak asks it to
(:meth:`TransactionalProducer.extend`): recovery is measured to the next commit, and
a pipeline with nothing new to read commits nothing, so data must keep flowing until
the last fault has recovered.

Every transaction's outcome lands in a :class:`~.ledger.Ledger`, so the checks know
exactly which records were committed and which aborted. The rules of the
transactional API (librdkafka): a retriable error is retried, an error that requires
an abort aborts the transaction, and a fatal error ends the producer instance; a new
instance with the same ``transactional.id`` fences the old one and aborts whatever
it left open. Only a fatal error inside ``commit_transaction`` leaves an outcome
unknown, which the ledger settles later from the topic.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from sluice_dev.events import EventFactory
from sluice_dev.soak.ledger import Ledger, Outcome

T = TypeVar("T")
CALL_SECONDS = 30.0
"""Timeout of one transactional call; retried until :data:`RETRY_SECONDS`."""
RETRY_SECONDS = 300.0
"""How long a transactional call is retried before the producer gives up."""
QUIET = 2
"""librdkafka's log level (syslog's): critical only. The soak breaks connections on
purpose; a failed delivery surfaces as a failed transaction, which the ledger records."""


@dataclass(frozen=True)
class Production:
    bootstrap: str
    topic: str
    count: int
    rate: float
    factory: EventFactory
    seed: int
    abort_ratio: float = 0.10
    transaction_size: int = 50


class FatalProducerError(Exception):
    """The producer instance is unusable; a new one takes over. ``outcome`` is what
    became of the transaction it was in."""

    def __init__(self, message: str, outcome: Outcome) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass
class TransactionalProducer:
    """Produces at least ``count`` events in a thread; ``produced`` counts the sequence
    numbers whose transaction has ended, ``ledger`` says how."""

    production: Production
    ledger: Ledger = field(default_factory=Ledger)
    produced: int = 0
    error: BaseException | None = None
    transactional_id: str = field(default_factory=lambda: f"sluice-soak-{uuid.uuid4().hex[:8]}")
    _thread: threading.Thread | None = None
    _more: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> TransactionalProducer:
        self._thread = threading.Thread(target=self._run, name="soak-producer", daemon=True)
        self._thread.start()
        return self

    def extend(self) -> None:
        """Go on producing past ``count`` until :meth:`finish`."""
        self._more.set()

    def finish(self) -> None:
        """Stop at ``count``, or at the end of the current transaction if past it."""
        self._more.clear()

    def stop(self) -> None:
        """Stop at the end of the current transaction, whatever the count (the soak is
        ending early)."""
        self._stop.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Until every transaction has ended; raises if the producer failed or is late."""
        assert self._thread is not None, "start() first"
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"still producing after {timeout}s")
        if self.error is not None:
            raise RuntimeError(f"the soak's producer failed: {self.error}") from self.error

    def _run(self) -> None:
        try:
            self._produce_all()
        except BaseException as err:  # raised again by wait()
            self.error = err

    def _produce_all(self) -> None:
        spec = self.production
        rng = random.Random(spec.seed)
        producer = self._new_producer()
        began = time.monotonic()
        first = 0
        while (first < spec.count or self._more.is_set()) and not self._stop.is_set():
            end = first + spec.transaction_size
            end = end if first >= spec.count else min(spec.count, end)
            abort = rng.random() < spec.abort_ratio
            try:
                outcome = self._transaction(producer, first, end, abort, began)
            except FatalProducerError as err:
                outcome = err.outcome
                producer = self._new_producer()
            self.ledger.record(first, end, outcome)
            self.produced = first = end
        producer.flush(CALL_SECONDS)

    def _transaction(
        self, producer: Producer, first: int, end: int, abort: bool, began: float
    ) -> Outcome:
        spec = self.production
        try:
            _retrying(producer.begin_transaction)
            for seq in range(first, end):
                ahead = began + seq / spec.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
                key, value = spec.factory.record(seq)
                _send(producer, spec.topic, key, value)
            if abort:
                _retrying(lambda: producer.abort_transaction(CALL_SECONDS))
                return Outcome.ABORTED
        except KafkaException as err:
            return _after_failure(producer, err, Outcome.ABORTED)
        try:
            _retrying(lambda: producer.commit_transaction(CALL_SECONDS))
        except KafkaException as err:
            return _after_failure(producer, err, Outcome.UNKNOWN)
        return Outcome.COMMITTED

    def _new_producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.production.bootstrap,
                "transactional.id": self.transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "transaction.timeout.ms": 120_000,
                "log_level": QUIET,
            }
        )
        _retrying(lambda: producer.init_transactions(CALL_SECONDS))
        return producer


def _after_failure(producer: Producer, err: KafkaException, fatal_outcome: Outcome) -> Outcome:
    """An abortable error aborts the transaction; a fatal one ends the instance, with
    ``fatal_outcome`` (unknown if the commit may have reached the coordinator)."""
    error: KafkaError = err.args[0]
    if error.txn_requires_abort():
        try:
            _retrying(lambda: producer.abort_transaction(CALL_SECONDS))
        except KafkaException:
            raise FatalProducerError(str(err), Outcome.ABORTED) from err
        return Outcome.ABORTED
    raise FatalProducerError(str(err), fatal_outcome) from err


def _retrying(call: Callable[[], T]) -> T:
    """``call`` again while it fails with a retriable error, for up to RETRY_SECONDS."""
    deadline = time.monotonic() + RETRY_SECONDS
    while True:
        try:
            return call()
        except KafkaException as err:
            error: KafkaError = err.args[0]
            if not error.retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _send(producer: Producer, topic: str, key: bytes, value: bytes) -> None:
    """Hand one record to the producer, waiting for room while its queue is full."""
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=_delivered)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.05)


def _delivered(err: Any, _msg: Any) -> None:
    """Delivery errors surface in ``commit_transaction``, which then fails."""
    del err
