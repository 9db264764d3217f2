"""The micro-batch loop of a Pub/Sub source: pull -> spool and plan -> write ->
commit -> acknowledge, one batch at a time (``docs/pubsub.md``).

    claim(epoch) -> recover a planned batch from the spool -> loop:
        pull a bounded batch (leases renewed from now on) -> drop repeats ->
        spool its messages, plan it (LWT), record its message ids ->
        read, transform, write -> commit (LWT) -> acknowledge
    on stop: finish the batch in flight, commit, acknowledge, give the rest back;
    with none in flight, stop at once and begin none (``stopping``)

The order is the promise. A message is acknowledged only after the commit that
covers its output (or its dead letter) applied, and a fenced driver's commit raises
before any acknowledgement, so it acknowledges nothing. A batch's messages are in
the spool before it is planned, so whoever executes a batch id executes the same
messages; their ids are recorded before the batch runs, so a later delivery of any
of them is recognised and dropped (``spool``). Repeats are acknowledged only with
the next commit, or after a read that shows the driver still holds its epoch.

It shares with the Kafka loop (``runner``) the checkpoint store and its fencing,
the executor, the outage handling and the observer; a Pub/Sub batch is recorded as
the range ``[start, end)`` of the subscription's running message count
(``messages``), so its history and metrics read like a Kafka batch's.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Final, Protocol, TypeVar

from sluice_job import announce, logs, outages, stopping, write_order
from sluice_job.batch import BatchRun, StepTimes, attempted, deadline, log_fields
from sluice_job.checkpoint import Batch, Checkpoint, FencedError
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_job.ports import Executor, NoObserver, Observer, Store, with_watermark
from sluice_job.pubsub.leases import Leases
from sluice_job.pubsub.messages import Message, oldest_published, sort_deliveries, take
from sluice_job.runner import IDLE_FIRST, Progress, idle_after

T = TypeVar("T")

PULL_ROUND_SECONDS: Final = 1.0
"""The least time a batch's pulls may take to gather a backlog (with a trigger
interval below it); a longer interval is the bound."""


class Pulling(Protocol):
    def pull(self, max_messages: int) -> list[Message]: ...
    def ack(self, ack_ids: Sequence[str]) -> None: ...


class Spooling(Protocol):
    """The spool and the record of taken message ids (``spool.Spool``)."""

    def write(self, batch: Batch, messages: Sequence[Message]) -> None: ...
    def read(self, batch: Batch) -> tuple[Message, ...]: ...
    def drop(self, batch: Batch) -> None: ...
    def mark(self, batch: Batch, messages: Iterable[Message]) -> None: ...
    def committed(self, messages: Iterable[Message]) -> set[str]: ...


class Holding(Protocol):
    def hold(self, batch: Batch, messages: Sequence[Message]) -> None: ...


class PubSubObserver(Protocol):
    """What the Pub/Sub loop reports beyond the common observer (metrics)."""

    def pulled(self, count: int) -> None: ...
    def repeats(self, redelivered: int, deduplicated: int) -> None: ...
    def acked(self, count: int, *, failed: int = 0) -> None: ...
    def held(self, count: int, oldest_published: datetime | None) -> None:
        """``count`` messages held unacknowledged, the oldest published then: its age
        is read when it is reported, so it grows while a batch waits."""


class NoPubSubObserver:
    def pulled(self, count: int) -> None:
        pass

    def repeats(self, redelivered: int, deduplicated: int) -> None:
        pass

    def acked(self, count: int, *, failed: int = 0) -> None:
        pass

    def held(self, count: int, oldest_published: datetime | None) -> None:
        pass


@dataclass
class PubSubRunner:
    epoch: int
    subscription_id: str
    """The subscription's id: the ``topic`` of its range in the checkpoint."""
    max_messages: int
    max_bytes: int
    interval: float
    store: Store
    spool: Spooling
    subscription: Pulling
    leases: Leases
    records: Holding
    executor: Executor
    ownership: Callable[[], bool]
    """Whether this driver still holds its epoch (a serial read of the checkpoint)."""
    stop: threading.Event = field(default_factory=threading.Event)
    progress: Progress = field(default_factory=Progress)
    observer: Observer = field(default_factory=NoObserver)
    pubsub_observer: PubSubObserver = field(default_factory=NoPubSubObserver)
    clock: Callable[[], float] = time.perf_counter
    wall: Callable[[], float] = time.time
    pause: Callable[[float], None] | None = None
    """``None``: sleeps, or between batches waits on ``stop`` (``Runner.pause``)."""
    batch_timeout: float | None = None
    on_timeout: Callable[[int, float], None] | None = None
    _waiting: list[Message] = field(init=False, default_factory=list)
    """Pulled, new, leased, not yet in a batch (over the caps of the last one)."""
    _repeats: list[Message] = field(init=False, default_factory=list)
    """Deliveries of messages already taken or held: acknowledged with the next commit."""
    _times: StepTimes = field(init=False)
    """Seconds of the Pub/Sub steps since the last batch was acknowledged."""
    _store: Store = field(init=False)
    _executor: Executor = field(init=False)

    @property
    def _pull_round(self) -> float:
        return max(self.interval, PULL_ROUND_SECONDS)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.subscription_id, 0)

    def run(self) -> None:
        """Until ``stop`` is set; raises on any failure (nothing then is committed).
        A stop with no batch in flight ends it at once: before the claim it raises
        ``StopRequestedError`` (nothing claimed), after it the driver releases."""
        self._store = announce.AnnouncingStore(self.store)
        self._executor = announce.AnnouncingExecutor(self.executor)
        self._times = StepTimes(self.clock)
        self.leases.start()
        clean = False
        try:
            checkpoint = self._retrying("claim", lambda: self._store.claim(self.epoch))
            self._claimed(checkpoint)
            try:
                if checkpoint.planned is not None:
                    self._recover(checkpoint.planned)
                self._loop()
            except stopping.StopRequestedError as stopped:
                logs.event("stopped with no batch in flight", left_undone=stopped.step)
            outages.best_effort("acknowledge repeats", self._ack_repeats_if_owner, self.observer)
            clean = True
        finally:
            # Stopping cleanly, give back what no batch took; failing, let the leases
            # run out (the next driver gets the messages then, and recognises repeats).
            self.leases.close(give_back=clean)
        if outages.best_effort("release", self._store.release, self.observer):
            logs.event("released", epoch=self.epoch, batch_id=self.progress.batch_id)

    def _claimed(self, checkpoint: Checkpoint) -> None:
        self.progress.resume(checkpoint)
        self.observer.resumed(checkpoint)
        logs.event(
            "claimed",
            epoch=self.epoch,
            batch_id=checkpoint.batch_id,
            messages_committed=checkpoint.positions.get(self.tp, 0),
        )

    def _recover(self, planned: Batch) -> None:
        """A batch planned by an earlier driver and never committed runs again with
        the same messages, read back from the spool."""
        messages = self._retrying("recover", lambda: self.spool.read(planned))
        logs.event(
            "recovering planned batch",
            batch_id=planned.batch_id,
            messages=len(messages),
            spool=planned.spool,
        )
        self._run_batch(planned, messages, planned_ahead=True)

    def _loop(self) -> None:
        next_start, idle = time.monotonic(), IDLE_FIRST
        while not self.stop.is_set():
            if self.stop.wait(max(0.0, next_start - time.monotonic())):
                break
            looked = time.monotonic()
            taken = self._retrying("pull", self._next_batch)
            if taken is None:  # nothing new: look again later and later
                self._retrying("acknowledge repeats", self._ack_repeats_if_owner)
                next_start, idle = looked + max(self.interval, idle), idle_after(idle)
                continue
            next_start, idle = looked + self.interval, IDLE_FIRST
            self._run_batch(*taken, planned_ahead=False)

    def _next_batch(self) -> tuple[Batch, tuple[Message, ...]] | None:
        self._pull()
        taken = take(self._waiting, self.max_messages, self.max_bytes)
        self._waiting = list(taken.waiting)
        self._report_held(taken.batch)
        if not taken.batch:
            return None
        start = self.progress.positions.get(self.tp, 0)
        end = start + len(taken.batch)
        batch = Batch(
            self.progress.batch_id + 1,
            (OffsetRange(self.tp, start, end),),
            {**self.progress.positions, self.tp: end},
            write_order.next_version(self.progress.version, self.wall()),
            spool=uuid.uuid4().hex,
        )
        return batch, taken.batch

    def _pull(self) -> None:
        """Pull until the new messages waiting fill a batch, the subscription has no
        more for now, or the pulls have lasted a trigger interval (at least
        :data:`PULL_ROUND_SECONDS`) with messages waiting: a steady stream slower than
        the caps would otherwise hold every batch back until it filled. Leases are
        renewed from the moment of the pull."""
        began = self.clock()
        while len(self._waiting) < self.max_messages:
            if sum(m.size for m in self._waiting) >= self.max_bytes:
                return
            if self._waiting and self.clock() - began >= self._pull_round:
                return
            wanted = self.max_messages - len(self._waiting)
            deliveries = self._timed("pull", partial(self.subscription.pull, wanted))
            if not deliveries:
                return
            self.leases.hold(m.ack_id for m in deliveries)
            self.pubsub_observer.pulled(len(deliveries))
            try:
                self._sort(deliveries)
            except Exception:  # an outage: these would be held, renewed, forever
                self.leases.give_back([m.ack_id for m in deliveries])
                raise

    def _sort(self, deliveries: Sequence[Message]) -> None:
        """New messages wait for a batch; repeats wait for an acknowledgement."""
        committed = self._timed("lookup", lambda: self.spool.committed(deliveries))
        held = [m.message_id for m in self._waiting]
        sorted_ = sort_deliveries(deliveries, committed, held)
        self._waiting.extend(sorted_.new)
        if sorted_.repeats:
            deduplicated = sum(1 for m in sorted_.repeats if m.message_id in committed)
            self.pubsub_observer.repeats(len(sorted_.repeats), deduplicated)
            self._repeats.extend(sorted_.repeats)
            logs.event("repeats", redelivered=len(sorted_.repeats), deduplicated=deduplicated)

    def _run_batch(self, batch: Batch, messages: Sequence[Message], *, planned_ahead: bool) -> None:
        """Batch ``batch`` to its acknowledgement, unless a stop came first
        (``StopRequestedError``: its messages are given back, or stay in the spool)."""
        if self.stop.is_set() or not self.progress.gate.begin(batch.batch_id):
            raise stopping.StopRequestedError(f"batch {batch.batch_id}")
        try:
            attempt = partial(self._attempt, batch, messages, planned_ahead=planned_ahead)
            attempted(batch.batch_id, attempt, self.observer, self.pause or time.sleep)
            self._acknowledge(batch, messages)
        finally:
            self.progress.gate.end()

    def _attempt(self, batch: Batch, messages: Sequence[Message], *, planned_ahead: bool) -> None:
        with deadline(batch.batch_id, self.batch_timeout, self.on_timeout):
            run = BatchRun(self.clock, batch=batch)
            if not planned_ahead:
                run.timed("plan", lambda: self._plan(batch, messages))
            run.timed("plan", lambda: self._timed("mark", lambda: self.spool.mark(batch, messages)))
            self.records.hold(batch, messages)
            times = self._executor.execute(batch, self.epoch)
            done_batch = with_watermark(batch, times)
            lwt = run.timed("commit", lambda: self._store.commit(done_batch, run.started_at))
        self._advance(batch)
        done = run.committed(times, lwt)
        self.observer.committed(done)
        logs.event("batch", **log_fields(done, epoch=self.epoch, recovered=planned_ahead))

    def _plan(self, batch: Batch, messages: Sequence[Message]) -> None:
        self._timed("spool", lambda: self.spool.write(batch, messages))
        self._store.plan(batch)

    def _timed(self, step: str, call: Callable[[], T]) -> T:
        return self._times.timed(step, call)

    def _advance(self, batch: Batch) -> None:
        self.progress.advance(batch)

    def _acknowledge(self, batch: Batch, messages: Sequence[Message]) -> None:
        """After the commit: the batch's messages and the repeats seen so far. An
        acknowledgement that fails is not retried: the message comes back and is
        dropped as a repeat."""
        repeats, self._repeats = self._repeats, []
        ack_ids = [m.ack_id for m in (*messages, *repeats) if m.ack_id]
        self._timed("ack", lambda: self._ack(ack_ids, batch.batch_id))
        times, self._times = self._times.seconds, StepTimes(self.clock)
        fields: dict[str, Any] = {f"{k}_s": round(v, 4) for k, v in sorted(times.items())}
        logs.event(
            "pubsub batch",
            batch_id=batch.batch_id,
            messages=len(messages),
            repeats=len(repeats),
            **fields,
        )
        try:
            self.spool.drop(batch)
        except Exception as err:  # the spool's TTL removes it anyway
            logs.event("spool not dropped", level=30, batch_id=batch.batch_id, message=str(err))
        self._report_held()

    def _ack(self, ack_ids: Sequence[str], batch_id: int | None) -> None:
        if not ack_ids:
            return
        failed = 0
        try:
            self.subscription.ack(ack_ids)
        except Exception as err:
            failed = len(ack_ids)
            logs.event(
                "acknowledgement failed: the messages come back and are dropped as repeats",
                level=30,
                batch_id=batch_id,
                messages=failed,
                message=str(err)[:500],
            )
        self.leases.forget(ack_ids)
        self.pubsub_observer.acked(len(ack_ids) - failed, failed=failed)
        if not failed:
            logs.event("acknowledged", batch_id=batch_id, messages=len(ack_ids))

    def _ack_repeats_if_owner(self) -> None:
        """Repeats with no batch to go with: acknowledged once a read shows this
        driver still holds its epoch (a fenced driver acknowledges nothing)."""
        if not self._repeats:
            return
        if not self.ownership():
            raise FencedError(f"epoch {self.epoch} no longer holds the pipeline")
        repeats, self._repeats = self._repeats, []
        self._ack([m.ack_id for m in repeats if m.ack_id], None)
        self._report_held()

    def _report_held(self, in_flight: Sequence[Message] = ()) -> None:
        held = [*in_flight, *self._waiting, *self._repeats]
        self.pubsub_observer.held(len(held), oldest_published(held))

    def _retrying(self, step: str, call: Callable[[], T]) -> T:
        return outages.through_outages(step, call, self.observer, pause=self.pause, stop=self.stop)
