"""Drivers read off the reconcile threads (``scrapes``): a reconcile takes the last
reading and never waits; a driver that stalls an exchange is asked again later, after
every driver that answers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from sluice_operator import scrapes
from sluice_operator.progress import DriverProgress
from sluice_operator.scrapeget import Outcome
from tests.support.waiting import wait_for

pytestmark = pytest.mark.unit

PIPELINE = "ns/kpis"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def report(batch: int) -> DriverProgress:
    return DriverProgress(epoch=3, batch_id=batch, committed_at=None, lag=0)


def idle(exchanges: scrapes.Exchanges) -> None:
    wait_for(lambda: not exchanges.busy(), timeout=10, what="the exchanges done")


@dataclass
class Scripted:
    """A driver's ``/metrics`` as the reads find it: ``outcomes`` in turn, then ``then``
    for ever (``None``: a read past the script fails the test); each read's time kept."""

    clock: Clock
    outcomes: list[Outcome]
    then: Outcome | None = None
    reads: list[float] = field(default_factory=list)

    def __call__(
        self, host: str, port: int, pipeline: str
    ) -> tuple[Outcome, DriverProgress | None]:
        self.reads.append(self.clock())
        outcome = self.outcomes.pop(0) if self.outcomes or self.then is None else self.then
        return outcome, report(1) if outcome is Outcome.ANSWERED else None

    def readings(self) -> tuple[scrapes.Exchanges, scrapes.Readings]:
        exchanges = scrapes.Exchanges(clock=self.clock)
        return exchanges, scrapes.Readings(exchanges, self, clock=self.clock)


def test_a_reconcile_gets_the_last_reading_and_a_new_one_when_it_is_old() -> None:
    clock = Clock()
    answers = [report(1), report(1), report(2)]
    reads: list[tuple[str, int, str]] = []

    def read(host: str, port: int, pipeline: str) -> tuple[Outcome, DriverProgress | None]:
        reads.append((host, port, pipeline))
        return Outcome.ANSWERED, answers[len(reads) - 1]

    exchanges = scrapes.Exchanges(clock=clock)
    readings = scrapes.Readings(exchanges, read, clock=clock)
    rung: list[str] = []
    readings.notify = rung.append

    assert readings.latest(PIPELINE, "127.1.2.3", 8090) is None  # none yet: not waited for
    idle(exchanges)
    assert reads == [("127.1.2.3", 8090, PIPELINE)]
    assert rung == [PIPELINE]  # news: the pipeline's loop is woken
    assert readings.latest(PIPELINE, "127.1.2.3", 8090) == report(1)
    idle(exchanges)
    assert len(reads) == 1  # fresh: not read again

    clock.advance(scrapes.FRESH_SECONDS)
    assert readings.latest(PIPELINE, "127.1.2.3", 8090) == report(1)
    idle(exchanges)
    assert len(reads) == 2
    assert rung == [PIPELINE]  # the same answer: nobody woken
    clock.advance(scrapes.FRESH_SECONDS)
    readings.latest(PIPELINE, "127.1.2.3", 8090)
    idle(exchanges)
    assert rung == [PIPELINE, PIPELINE]
    assert readings.latest(PIPELINE, "127.1.2.3", 8090) == report(2)


def slow(clock: Clock, seconds: float, outcome: Outcome) -> Callable[[], Outcome]:
    def work() -> Outcome:
        clock.advance(seconds)
        return outcome

    return work


def test_a_driver_that_misbehaves_is_backed_off_doubling_and_forgiven_when_it_answers() -> None:
    clock = Clock()
    exchanges = scrapes.Exchanges(clock=clock)
    host, timeout = "127.4.5.6", 1.0
    base = scrapes.BACKOFF_BASE_SECONDS

    def settle(seconds: float, outcome: Outcome) -> None:
        assert exchanges.submit(("m", host), host, timeout, slow(clock, seconds, outcome))
        idle(exchanges)

    settle(0.1, Outcome.UNREACHABLE)
    assert not exchanges.suspect(host)  # refused at once: starting, not suspect
    settle(0.6, Outcome.UNREACHABLE)  # never accepted within half the deadline
    assert exchanges.suspect(host)
    assert not exchanges.submit(("m", host), host, timeout, slow(clock, 0, Outcome.ANSWERED))
    clock.advance(base * 2)
    settle(0.01, Outcome.MISBEHAVED)  # connected, answered nothing usable: at once
    clock.advance(base * 2)
    assert exchanges.suspect(host)  # three times: eight times the base now
    clock.advance(base * 6)
    settle(0.01, Outcome.ANSWERED)
    assert not exchanges.suspect(host)
    settle(0.01, Outcome.MISBEHAVED)
    clock.advance(base * 2)  # forgiven: the count began again
    assert not exchanges.suspect(host)


def test_one_exchange_per_driver_at_a_time_and_suspects_after_the_others() -> None:
    clock = Clock()
    exchanges = scrapes.Exchanges(workers=1, clock=clock)
    gate, started = threading.Event(), threading.Event()
    order: list[str] = []

    def blocked() -> Outcome:
        started.set()
        gate.wait(10)
        return Outcome.ANSWERED

    def note(
        name: str, outcome: Outcome = Outcome.ANSWERED, took: float = 0.0
    ) -> Callable[[], Outcome]:
        def work() -> Outcome:
            order.append(name)
            clock.advance(took)
            return outcome

        return work

    exchanges.submit(("m", "bad"), "bad", 1.0, note("bad", Outcome.MISBEHAVED))
    idle(exchanges)
    clock.advance(scrapes.BACKOFF_CAP_SECONDS)  # its back-off over, still suspect
    order.clear()

    exchanges.submit(("m", "busy"), "busy", 1.0, blocked)
    started.wait(10)
    assert exchanges.submit(("m", "bad"), "bad", 1.0, note("bad"))
    assert exchanges.submit(("m", "good"), "good", 1.0, note("good"))
    assert not exchanges.submit(("m", "good"), "good", 1.0, note("good again"))
    gate.set()
    idle(exchanges)
    assert order == ["good", "bad"]


def test_an_exchange_that_raises_leaves_the_workers_serving() -> None:
    exchanges = scrapes.Exchanges(workers=1)

    def broken() -> Outcome:
        raise RuntimeError("a bug")

    exchanges.submit(("m", "a"), "a", 1.0, broken)
    done = threading.Event()
    exchanges.submit(("m", "b"), "b", 1.0, lambda: done.set() or Outcome.ANSWERED)
    assert done.wait(10)


def test_a_driver_that_answered_and_then_cannot_be_connected_to_is_silent_until_it_answers() -> (
    None
):
    """Issue 43: a driver whose node crashed gives no exit, and its pod says Running
    until the node counts as lost; what the operator sees first is that its reads of
    the driver no longer connect. A driver still starting (never reached) is not
    silent, and one that answers again is not silent any more."""
    clock = Clock()
    outcomes = [Outcome.UNREACHABLE, Outcome.ANSWERED, Outcome.UNREACHABLE, Outcome.UNREACHABLE]
    exchanges, readings = Scripted(clock, [*outcomes, Outcome.MISBEHAVED]).readings()

    def look(after: float) -> float | None:
        clock.advance(after)
        readings.latest(PIPELINE, "127.1.2.3", 8090)
        idle(exchanges)
        return readings.silent_for(PIPELINE, "127.1.2.3", 8090)

    assert look(0) is None, "refused before it ever answered: starting, not silent"
    assert look(scrapes.FRESH_SECONDS) is None, "it answers"
    assert look(scrapes.FRESH_SECONDS) == 0.0, "silent from its first refusal"
    assert look(scrapes.FRESH_SECONDS) == scrapes.FRESH_SECONDS, "and still, counted from then"
    clock.advance(0.5)
    assert readings.silent_for(PIPELINE, "127.1.2.3", 8090) == scrapes.FRESH_SECONDS + 0.5
    assert look(scrapes.FRESH_SECONDS) is None, "connected (a slow answer): alive"
    assert readings.silent_for(PIPELINE, "127.9.9.9", 8090) is None, "never read"


def test_a_followed_driver_is_read_every_second_between_reconciles_and_its_silence_is_news() -> (
    None
):
    """A running pipeline is reconciled every 5 s; its driver's crash was seen only at
    the next reconcile's read (6.4 s from the node crash to the promotion in a soak).
    A driver with a Ready hot standby is followed: read each second for
    ``FOLLOW_SECONDS`` after a reconcile asked, and the pipeline woken when it falls
    silent."""
    clock = Clock()
    outcomes = [Outcome.ANSWERED, Outcome.ANSWERED, Outcome.UNREACHABLE, Outcome.UNREACHABLE]
    read = Scripted(clock, outcomes, then=Outcome.UNREACHABLE)
    exchanges, readings = read.readings()
    reads = read.reads
    rung: list[str] = []
    readings.notify = rung.append
    readings.latest(PIPELINE, "127.1.2.3", 8090, follow=True)
    idle(exchanges)
    for _ in range(3):  # no reconcile asks in between
        clock.advance(scrapes.FRESH_SECONDS)
        readings.tick()
        idle(exchanges)
    assert len(reads) == 4, "read each second, not at the next reconcile"
    assert rung == [PIPELINE, PIPELINE], "woken at its first answer and as it fell silent"
    assert readings.silent_for(PIPELINE, "127.1.2.3", 8090) == scrapes.FRESH_SECONDS
    clock.advance(scrapes.FOLLOW_SECONDS)
    readings.tick()
    idle(exchanges)
    assert len(reads) == 4, "not followed once no reconcile asked for FOLLOW_SECONDS"
    unfollowed = scrapes.Readings(exchanges, read, clock=clock)
    unfollowed.latest(PIPELINE, "127.7.7.7", 8090)
    idle(exchanges)
    clock.advance(scrapes.FRESH_SECONDS)
    unfollowed.tick()
    idle(exchanges)
    assert len(reads) == 5, "a driver nobody follows is read when a reconcile asks"


def test_a_followed_driver_that_fell_silent_is_read_again_each_quarter_second() -> None:
    """Issue 43, item 6: read each second, a crashed node's driver was promoted over
    2.2 s after the crash (p50 of a soak at load 6), the next commit 5.4 s after, over
    the 5 s target. Once it fell silent, a followed driver is read again every
    ``RECHECK_SECONDS``, so its silence is confirmed by reads a quarter second apart;
    one that answers is still read each second. On the old code the second read came
    a second later."""
    clock = Clock()
    outcomes = [Outcome.ANSWERED, Outcome.UNREACHABLE, Outcome.UNREACHABLE, Outcome.ANSWERED]
    read = Scripted(clock, outcomes, then=Outcome.ANSWERED)
    exchanges, readings = read.readings()
    reads = read.reads
    readings.latest(PIPELINE, "127.1.2.3", 8090, follow=True)
    idle(exchanges)

    def tick(after: float) -> None:
        clock.advance(after)
        readings.tick()
        idle(exchanges)

    tick(scrapes.RECHECK_SECONDS)
    assert len(reads) == 1, "a driver that answers is not read again within the second"
    tick(scrapes.FRESH_SECONDS - scrapes.RECHECK_SECONDS)
    assert len(reads) == 2, "read again after a second: refused"
    tick(scrapes.RECHECK_SECONDS)
    assert len(reads) == 3, "silent: read again a quarter second later"
    assert readings.silent_for(PIPELINE, "127.1.2.3", 8090) == scrapes.RECHECK_SECONDS
    tick(scrapes.RECHECK_SECONDS)
    assert len(reads) == 4, "and again"
    assert readings.silent_for(PIPELINE, "127.1.2.3", 8090) is None, "it answered: alive"
    tick(scrapes.RECHECK_SECONDS)
    assert len(reads) == 4, "answering again, it is read each second again"
