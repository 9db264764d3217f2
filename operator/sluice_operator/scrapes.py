"""Talking to drivers off the reconcile threads: their ``/metrics`` read, their
promotions sent, on a few threads of their own, each driver backed off once it has
stalled an exchange.

Why it exists (issue 38, finding 1): a driver runs a tenant's image, and one operator
serves every tenant. Each exchange is bounded (``scrapeget``: one deadline for the
whole of it), but a bound is not enough at scale: when every reconcile read its
drivers itself, a thousand drivers that each use up their second kept the 32
reconcile threads busy, and another tenant's failover queued behind them. Here a
reconcile never waits on a driver. It takes the last reading of its drivers
(:meth:`Readings.latest`) and, when that is older than :data:`FRESH_SECONDS`, asks for
a new one; :data:`WORKERS` threads carry out the exchanges, a driver at most one at a
time, and a reading that differs from the last wakes its pipeline (``notify``: the
pipeline's bell), so the next decision comes as soon as there is news. A driver that connected
and gave no usable answer (a trickle, a stall, a flood, an answer past the limits)
is suspect: it waits behind every driver that is not, and is not asked again for
``base * 2**failures`` seconds (at most :data:`BACKOFF_CAP_SECONDS`), so well-behaved
drivers keep the workers however many misbehave. A driver that answers resets its
count; one that refuses the connection at once (still starting) is not suspect.

A driver that has answered and then cannot be connected to at all (refused,
unreachable, no answer to the connection) is *silent* (:meth:`Readings.silent_for`):
its process or its node is gone, while its pod may still say Running until the node
counts as lost. A loaded driver is not silent: the kernel accepts its connections
while the process is busy, so a slow one is suspect at worst. ``hot_standby`` promotes
a Ready standby over a silent driver.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from sluice_operator import progress
from sluice_operator.progress import DriverProgress
from sluice_operator.scrapeget import Outcome

LOG = logging.getLogger(__name__)
WORKERS: Final = 4
"""Threads for exchanges with drivers. A well-behaved one takes milliseconds."""
FRESH_SECONDS: Final = 1.0
"""A reading older than this is renewed when a reconcile asks for it."""
SLOW_FRACTION: Final = 0.5
"""A connection that failed after this fraction of its deadline (a driver that never
accepts) makes its driver suspect, as does every exchange that connected and gave no
usable answer (``scrapeget.Outcome``)."""
BACKOFF_BASE_SECONDS: Final = 1.0
"""The first back-off is twice this: a driver that was merely slow once (a loaded
node) is asked again soon."""
BACKOFF_CAP_SECONDS: Final = 300.0
FORGET_SECONDS: Final = 600.0
"""A driver no reconcile asked about for this long is forgotten (it is gone)."""
FOLLOW_SECONDS: Final = 12.0
"""A driver a reconcile asked to follow is read every :data:`FRESH_SECONDS` for this
long after the ask, reconcile or not: a running pipeline is reconciled every 5 s
(``Settings.progress_seconds``), and the next ask renews the follow."""
RECHECK_SECONDS: Final = 0.25
"""A followed driver that fell silent is read again this often, not each second: its
silence is confirmed, or ended, by reads a quarter second apart (``hot_standby``
takes it for gone after ``SILENT_SECONDS``). Read each second, a crashed node's driver
was promoted over 2.2 s after the crash (p50, a soak at load 6); the refused
connections cost nothing."""


def endpoint(host: str, port: int) -> str:
    """What suspicion is kept for: a driver's port (a driver whose metrics answer
    while its control port stalls is suspect on the one alone)."""
    return f"{host}:{port}"


@dataclass
class _Suspicion:
    failures: int = 0
    until: float = 0.0


@dataclass(order=True)
class _Errand:
    rank: int
    seq: int
    key: tuple[str, ...] = field(compare=False)
    endpoint: str = field(compare=False)
    timeout: float = field(compare=False)
    work: Callable[[], Outcome] = field(compare=False)


class Exchanges:
    """A pool of :data:`WORKERS` threads carrying out exchanges with drivers, at most
    one per key, suspect endpoints last and backed off."""

    def __init__(self, workers: int = WORKERS, clock: Callable[[], float] = time.monotonic) -> None:
        self._workers = workers
        self._clock = clock
        self._queue: list[_Errand] = []
        self._busy: set[tuple[str, ...]] = set()
        self._suspects: dict[str, _Suspicion] = {}
        self._seq = itertools.count()
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []

    def submit(
        self, key: tuple[str, ...], endpoint: str, timeout: float, work: Callable[[], Outcome]
    ) -> bool:
        """Queue ``work`` (an exchange with ``endpoint``, a driver's port, bounded by
        ``timeout`` seconds, returning how it went) unless one of ``key`` is queued or
        running, or ``endpoint`` is backed off; whether it was queued."""
        with self._ready:
            if key in self._busy:
                return False
            suspicion = self._suspects.get(endpoint)
            if suspicion is not None and self._clock() < suspicion.until:
                return False
            rank = suspicion.failures if suspicion is not None else 0
            errand = _Errand(rank, next(self._seq), key, endpoint, timeout, work)
            self._busy.add(key)
            heapq.heappush(self._queue, errand)
            self._start()
            self._ready.notify()
        return True

    def busy(self) -> bool:
        """Whether any exchange is queued or running."""
        with self._ready:
            return bool(self._busy)

    def suspect(self, endpoint: str) -> bool:
        """Whether ``endpoint`` is backed off now."""
        with self._ready:
            suspicion = self._suspects.get(endpoint)
            return suspicion is not None and self._clock() < suspicion.until

    def _start(self) -> None:
        while len(self._threads) < self._workers:
            thread = threading.Thread(
                target=self._serve, name=f"driver-io-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                errand = heapq.heappop(self._queue)
            started = self._clock()
            try:
                outcome = errand.work()
            except Exception:  # a bug here must not end the thread
                LOG.exception("exchange with %s failed", errand.endpoint)
                outcome = Outcome.UNREACHABLE
            self._settle(errand, outcome, self._clock() - started)

    def _settle(self, errand: _Errand, outcome: Outcome, took: float) -> None:
        with self._ready:
            self._busy.discard(errand.key)
            if outcome is Outcome.ANSWERED:
                self._suspects.pop(errand.endpoint, None)
                return
            if outcome is Outcome.UNREACHABLE and took < errand.timeout * SLOW_FRACTION:
                return  # refused at once: starting, or gone; not suspect
            suspicion = self._suspects.setdefault(errand.endpoint, _Suspicion())
            suspicion.failures += 1
            wait = min(BACKOFF_BASE_SECONDS * 2**suspicion.failures, BACKOFF_CAP_SECONDS)
            suspicion.until = self._clock() + wait
        if suspicion.failures == 1:
            LOG.warning(
                "driver at %s gave no usable answer (%s after %.1fs): asked again in "
                "%.0fs at the earliest, behind the drivers that answer",
                errand.endpoint,
                outcome.value,
                took,
                wait,
            )


@dataclass(frozen=True)
class _Reading:
    progress: DriverProgress | None
    taken: float
    asked: float
    reached: bool = False
    """The driver connected at least once (answered, or misbehaved)."""
    silent_since: float | None = None
    """When a driver that was reached last failed to connect, with no connection
    since (``None``: its last exchange connected, or it was never reached)."""


def after(known: _Reading | None, outcome: Outcome, now: float) -> tuple[bool, float | None]:
    """Whether the driver has been reached, and since when it is silent, once an
    exchange at ``now`` went as ``outcome``. A purely computational function."""
    if outcome is not Outcome.UNREACHABLE:
        return True, None
    if known is None or not known.reached:
        return False, None  # still starting, or never there: not silent
    return True, known.silent_since if known.silent_since is not None else now


Read = Callable[[str, int, str], tuple[Outcome, DriverProgress | None]]


class Readings:
    """The last reading of each driver's ``/metrics`` (``progress``), renewed through
    :class:`Exchanges` when a reconcile finds it older than :data:`FRESH_SECONDS`."""

    def __init__(
        self,
        exchanges: Exchanges,
        read: Read = progress.read,
        timeout: float = progress.TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._exchanges = exchanges
        self._read = read
        self._timeout = timeout
        self._clock = clock
        self._readings: dict[tuple[str, str, int], _Reading] = {}
        self._lock = threading.Lock()
        self._swept = clock()
        self._followed: dict[tuple[str, str, int], float] = {}
        """Drivers read every second until the time given (``follow``)."""
        self._ticker: threading.Thread | None = None
        self.notify: Callable[[str], None] = lambda pipeline: None
        """Called (on a worker thread) with the pipeline whose driver's reading
        changed; the operator rings the pipeline's bell."""

    def latest(
        self, pipeline: str, host: str, port: int, *, follow: bool = False
    ) -> DriverProgress | None:
        """The last reading of the driver of ``pipeline`` at ``host:port`` (``None``:
        none yet, or it did not answer), a new one asked for if it is old. ``follow``:
        go on reading it every :data:`FRESH_SECONDS` between reconciles, for
        :data:`FOLLOW_SECONDS` (a driver with a Ready hot standby: its silence is
        news, ``hot_standby.silent``)."""
        target = (pipeline, host, port)
        now = self._clock()
        with self._lock:
            known = self._readings.get(target)
            if known is not None:
                self._readings[target] = replace(known, asked=now)
            if follow:
                self._followed[target] = now + FOLLOW_SECONDS
            if now - self._swept > FORGET_SECONDS / 10:
                self._forget(now)
        if follow:
            self._start_ticker()
        if known is None or now - known.taken >= FRESH_SECONDS:
            self._submit(target)
        return known.progress if known is not None else None

    def tick(self) -> None:
        """One round of the followed drivers: each whose reading is old is read again,
        a silent one after :data:`RECHECK_SECONDS` (the ticker thread calls this every
        :data:`RECHECK_SECONDS`)."""
        now = self._clock()
        with self._lock:
            self._followed = {t: until for t, until in self._followed.items() if until > now}
            due = [
                target
                for target in self._followed
                if (known := self._readings.get(target)) is None
                or now - known.taken
                >= (FRESH_SECONDS if known.silent_since is None else RECHECK_SECONDS)
            ]
        for target in due:
            self._submit(target)

    def _submit(self, target: tuple[str, str, int]) -> None:
        _pipeline, host, port = target
        self._exchanges.submit(
            ("metrics", *map(str, target)),
            endpoint(host, port),
            self._timeout,
            lambda: self._renew(target),
        )

    def _start_ticker(self) -> None:
        with self._lock:
            if self._ticker is not None:
                return
            self._ticker = threading.Thread(target=self._tick_on, name="driver-follow", daemon=True)
        self._ticker.start()

    def _tick_on(self) -> None:
        while True:
            time.sleep(RECHECK_SECONDS)
            try:
                self.tick()
            except Exception:  # a bug here must not end the thread
                LOG.exception("following the drivers failed")

    def silent_for(self, pipeline: str, host: str, port: int) -> float | None:
        """Seconds the driver at ``host:port`` has been silent (reached before, not
        connected to since); ``None`` if it is not."""
        with self._lock:
            known = self._readings.get((pipeline, host, port))
        if known is None or known.silent_since is None:
            return None
        return max(0.0, self._clock() - known.silent_since)

    def _renew(self, target: tuple[str, str, int]) -> Outcome:
        pipeline, host, port = target
        outcome, reading = self._read(host, port, pipeline)
        now = self._clock()
        with self._lock:
            known = self._readings.get(target)
            reached, silent = after(known, outcome, now)
            asked = known.asked if known else now
            self._readings[target] = _Reading(reading, now, asked, reached, silent)
        fell_silent = silent is not None and (known is None or known.silent_since is None)
        if known is None or known.progress != reading or fell_silent:
            self.notify(pipeline)
        return outcome

    def _forget(self, now: float) -> None:
        self._swept = now
        self._readings = {
            target: reading
            for target, reading in self._readings.items()
            if now - reading.asked < FORGET_SECONDS
        }


EXCHANGES: Final = Exchanges()
"""The operator's: every pipeline's readings and promotions go through it."""
READINGS: Final = Readings(EXCHANGES)
