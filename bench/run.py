"""Running the benchmark once: the stack, the data, each phase for each contender,
then the ceiling.

Contenders run one at a time, in ``settings.order``, each in a fresh process:
throughput first (the backlog topic, shared), then latency at each rate of
``bench.pacing`` (a fresh topic per rate and contender), then a kill mid-run
(``bench.kill``), then the ceiling (``bench.ceiling``) on its own. Every contender
and phase writes its own sink table, so rows and visibility never mix. Before each
timed phase Cassandra is let finish its flushes and compactions
(``fixtures.quiesce``). A run uses fresh topics and a fresh keyspace, deleted at its
end: runs of ``--runs`` never share data.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cassandra.cluster import Session

from bench import ceiling, fixtures, kill, pacing
from bench.batches import BatchRecord
from bench.ceiling import CeilingRun
from bench.contenders import Contender, System, Target, child_env, start
from bench.fixtures import BACKLOG_SEED, BOOTSTRAP, CONTACT, Names, Topics
from bench.kill import KillRun
from bench.live import Pace, Poller, Produced, produce_paced
from bench.pacing import Pacing
from bench.settings import Settings
from bench.stats import window
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce

Say = Callable[[str], None]
START_TIMEOUT = 300.0
PRIME_START = 1_000_000_000
"""Sequence numbers of priming events: far from the paced ones, so ids never clash."""
LIVE_SEEDS = {System.SLUICE: 11, System.STRUCTURED: 12, System.REALTIME: 13, System.LOW_LATENCY: 14}
SUSTAINABLE = "sustainable"
TARGET = "target"
PHASES = (SUSTAINABLE, TARGET)
"""The latency phases, by rate: see ``bench.pacing``."""
QUIESCE_TIMEOUT = 120.0


@dataclass
class ThroughputRun:
    batches: list[BatchRecord]
    process_seconds: float
    """From starting the process until it reported the whole backlog (JVM start-up
    and session creation included)."""
    rows_in_sink: int | None


@dataclass
class LatencyRun:
    batches: list[BatchRecord]
    latencies: list[float]
    produced: Produced
    missing: int
    poll_rounds: int
    poll_errors: int
    poll_seconds: float
    pacing: Pacing


@dataclass
class Outcome:
    names: Names
    logs: Path
    backlog_seconds: float = 0.0
    throughput: dict[System, ThroughputRun] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    """The latency phases that ran (``PHASES``) and their rates."""
    latency: dict[str, dict[System, LatencyRun]] = field(default_factory=dict)
    kill: dict[System, KillRun] = field(default_factory=dict)
    ceiling: CeilingRun | None = None


def latency_rates(settings: Settings, throughput: dict[System, ThroughputRun]) -> dict[str, float]:
    """The latency phases to run and their rates (``bench.pacing``): the sustainable
    one from Sluice's and Structured Streaming's backlog rates (Real-Time Mode's
    only when it ran alone)."""
    ran = [s for s in settings.order if s in throughput]
    micro_batch = [s for s in ran if s is not System.REALTIME] or ran
    figures = [records_per_second(throughput[s]) for s in micro_batch]
    share = pacing.sustainable_rate(figures, settings.sustained_share, settings.rate)
    rates = {SUSTAINABLE: share} if share is not None else {}
    return {**rates, TARGET: settings.rate}


def records_per_second(run: ThroughputRun | None) -> float | None:
    """The backlog's records/s of a throughput run (whole window)."""
    if run is None:
        return None
    whole = window([b.span for b in run.batches])
    return whole.records_per_second if whole else None


@dataclass
class Bench:
    settings: Settings
    session: Session
    topics: Topics
    env: dict[str, str]
    outcome: Outcome
    say: Say

    @property
    def keyspace(self) -> str:
        return self.outcome.names.keyspace

    def target(self, topic: str, table: str, interval: float) -> Target:
        s = self.settings
        letters = self.topics.create(f"{topic}-{table}-dlq", 1) if s.dead_letter else None
        return Target(
            bootstrap=BOOTSTRAP,
            contact=CONTACT,
            keyspace=self.keyspace,
            topic=topic,
            table=table,
            partitions=s.partitions,
            cap=s.cap,
            interval=interval,
            driver_memory=s.driver_memory,
            sink_batch_rows=s.sink_batch_rows,
            sink_batch_bytes=s.sink_batch_bytes,
            checkpoint_seconds=s.realtime_checkpoint_seconds,
            dead_letter_topic=letters,
        )

    def start(self, system: System, target: Target, pipeline: str, epoch: int = 1) -> Contender:
        namespace = f"bench-{self.outcome.names.run}"
        return start(system, target, pipeline, namespace, self.outcome.logs, self.env, epoch)

    def produce_backlog(self) -> str:
        s = self.settings
        topic = self.topics.create(self.outcome.names.topic("backlog"), s.partitions)
        began = time.monotonic()

        def progress(done: int) -> None:
            if done % 100_000 == 0:
                self.say(f"  produced {done:,} / {s.events:,}")

        produce(BOOTSTRAP, topic, s.events, factory=EventFactory(BACKLOG_SEED), progress=progress)
        self.outcome.backlog_seconds = time.monotonic() - began
        self.say(f"backlog: {s.events:,} events on {topic} in {self.outcome.backlog_seconds:.1f}s")
        return topic

    def quiesce(self) -> None:
        waited = fixtures.quiesce(self.session, QUIESCE_TIMEOUT)
        if waited > 1.0:
            self.say(f"  waited {waited:.0f}s for Cassandra's flushes and compactions")

    def throughput(self, system: System, topic: str) -> ThroughputRun:
        self.quiesce()
        table = f"backlog_{system.value}"
        contender = self.start(system, self.target(topic, table, 0.0), "backlog")
        with _stopped_on_exit(contender):
            contender.wait(
                lambda c: c.records >= self.settings.events,
                self.settings.run_timeout,
                f"{self.settings.events:,} records",
            )
            seconds = time.monotonic() - contender.child.started
        rows = (
            fixtures.count_rows(self.session, self.keyspace, table)
            if self.settings.verify
            else None
        )
        run = ThroughputRun(contender.batches, seconds, rows)
        self.say(
            f"{system.display}: {contender.records:,} records in {len(run.batches)} batches, "
            f"process {seconds:.1f}s, rows in sink: {rows if rows is not None else '-'}"
        )
        return run

    def latency(self, system: System, phase: str, rate: float) -> LatencyRun:
        s = self.settings
        self.quiesce()
        role = f"live-{phase}-{system.value}"
        topic = self.topics.create(self.outcome.names.topic(role), s.partitions)
        table = live_table(phase, system)
        target = self.target(topic, table, s.trigger_seconds)
        contender = self.start(system, target, f"live-{phase}")
        with _stopped_on_exit(contender):
            contender.wait(lambda c: c.ready, START_TIMEOUT, "start")
            primed = self._prime(system, topic, contender, rate)
            poller = Poller(self.session, self.keyspace, table, s.poll_interval)
            poller.start()
            try:
                produced = self._produce_live(system, topic, poller, contender, rate)
                _drain(poller, contender, s.drain_timeout)
            finally:
                poller.stop()
        paced = pacing.pacing(
            contender.batches,
            produced=primed + produced.events,
            produce_ended=produced.ended,
            rate=rate,
            trigger_seconds=s.trigger_seconds,
            behind_triggers=s.behind_triggers,
            probes_missing=poller.waiting,
            open_batch_seconds=s.realtime_checkpoint_seconds if system is System.REALTIME else 0,
        )
        run = LatencyRun(
            contender.batches,
            list(poller.latencies),
            produced,
            poller.waiting,
            poller.rounds,
            poller.errors,
            poller.seconds,
            paced,
        )
        verdict = "kept pace" if paced.sustained else f"NOT SUSTAINED ({paced.why_not})"
        self.say(
            f"{system.display}: {produced.events:,} events at {produced.rate:,.0f}/s, "
            f"{len(run.latencies):,} probes seen, {run.missing} missing, "
            f"{paced.lag_seconds:.1f}s behind at the end of producing: {verdict}"
        )
        return run

    def _prime(self, system: System, topic: str, contender: Contender, rate: float) -> int:
        """One trigger's worth of events, processed before anything is produced at
        pace: a fresh process's first batch starts the Python workers and opens their
        Cassandra sessions, which is start-up, not latency. Returns the count."""
        count = max(1, int(rate * max(1.0, self.settings.trigger_seconds)))
        factory = EventFactory(LIVE_SEEDS[system])
        produce(BOOTSTRAP, topic, count, start=PRIME_START, factory=factory)
        contender.wait(lambda c: c.records >= count, START_TIMEOUT, "priming batch")
        return count

    def kill(self, system: System) -> KillRun:
        """The kill phase (``bench.kill``): SIGKILLed mid-run, restarted, checked."""
        s = self.settings
        self.quiesce()
        topic = self.topics.create(self.outcome.names.topic(f"kill-{system.value}"), s.partitions)
        table = kill_table(system)
        target = self.target(topic, table, s.trigger_seconds)

        def begin(epoch: int) -> Contender:
            contender = self.start(system, target, "kill", epoch)
            try:
                contender.wait(lambda c: c.ready, START_TIMEOUT, "start")
            except BaseException:
                contender.child.kill()
                raise
            return contender

        first = begin(1)
        try:
            primed = self._prime(system, topic, first, s.kill_rate)
        except BaseException:
            first.child.kill()
            raise
        plan = kill.Plan(
            s.kill_rate, s.kill_seconds, s.kill_after, s.drain_timeout, LIVE_SEEDS[system]
        )
        found = kill.measure(
            self.session,
            self.keyspace,
            table,
            BOOTSTRAP,
            topic,
            plan,
            first,
            begin,
            range(PRIME_START, PRIME_START + primed),
        )
        c = found.check
        caught = found.caught_up_seconds
        after = "never caught up" if caught is None else f"caught up {caught:.1f}s after the kill"
        self.say(
            f"{system.display}: killed {found.killed_after:.1f}s into producing, restarted in "
            f"{found.restart_ready_seconds:.1f}s, {after}"
            f": {c.missing} missing, {c.duplicates} duplicates, {c.rewritten} of "
            f"{c.written_before_restart:,} rows written before the kill written again"
        )
        return found

    def ceiling(self) -> CeilingRun:
        self.quiesce()
        s = self.settings
        return ceiling.measure(
            self.session,
            CONTACT,
            self.keyspace,
            s.ceiling_plan(),
            topic=self.outcome.names.topic("backlog"),
            partitions=s.partitions,
            verify=s.verify,
            say=self.say,
        )

    def _produce_live(
        self, system: System, topic: str, poller: Poller, contender: Contender, rate: float
    ) -> Produced:
        s = self.settings
        pace = Pace(rate, s.latency_seconds, s.warmup_seconds, s.sample_every)
        factory = EventFactory(LIVE_SEEDS[system])
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(produce_paced, BOOTSTRAP, topic, pace, factory, poller.watch)
            while not future.done():
                contender.poll()
                time.sleep(0.5)
            return future.result()


def live_table(phase: str, system: System) -> str:
    return f"live_{phase}_{system.value}"


def kill_table(system: System) -> str:
    return f"kill_{system.value}"


@contextmanager
def _stopped_on_exit(contender: Contender) -> Iterator[Contender]:
    """Stops the contender cleanly after the block; kills it if the block failed."""
    try:
        yield contender
    except BaseException:
        contender.child.kill()
        raise
    contender.stop()


def _drain(poller: Poller, contender: Contender, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while poller.waiting and time.monotonic() < deadline:
        contender.poll()
        time.sleep(0.2)


def run(settings: Settings, say: Say) -> Outcome:
    names = Names.fresh()
    logs = settings.results / f"{names.stamp}-logs"
    logs.mkdir(parents=True, exist_ok=True)
    jars = fixtures.ensure_stack(Layout.from_env(), say)
    outcome = Outcome(names, logs)
    topics = Topics(BOOTSTRAP)
    tables = [
        *(f"backlog_{s.value}" for s in System),
        *(live_table(phase, s) for phase in PHASES for s in System),
        *(kill_table(s) for s in System),
        ceiling.TABLE,
    ]
    with fixtures.cassandra_session(CONTACT) as session:
        fixtures.create_keyspace(session, names.keyspace, tables)
        bench = Bench(settings, session, topics, child_env(jars, {}), outcome, say)
        try:
            backlog = bench.produce_backlog()
            for system in settings.order:
                say(f"throughput: {system.display} draining the backlog")
                outcome.throughput[system] = bench.throughput(system, backlog)
            outcome.rates = latency_rates(settings, outcome.throughput)
            if SUSTAINABLE not in outcome.rates:
                say(
                    f"latency: no sustainable phase ({settings.sustained_share:g} of the "
                    f"slower backlog rate is not below {settings.rate:,.0f} events/s)"
                )
            for phase, rate in outcome.rates.items():
                for system in settings.order:
                    say(f"latency ({phase}): {system.display} at {rate:,.0f} events/s")
                    outcome.latency.setdefault(phase, {})[system] = bench.latency(
                        system, phase, rate
                    )
            if settings.kill_seconds > 0:
                for system in settings.order:
                    say(
                        f"kill: {system.display} at {settings.kill_rate:,.0f} events/s, "
                        f"SIGKILLed {settings.kill_after:g}s in"
                    )
                    outcome.kill[system] = bench.kill(system)
            say(f"ceiling: a standalone client writes {settings.ceiling_plan().rows:,} rows")
            outcome.ceiling = bench.ceiling()
        finally:
            if not settings.keep:
                fixtures.drop_keyspace(session, names.keyspace)
                topics.delete_all()
                for checkpoint in logs.glob("*.checkpoint"):
                    shutil.rmtree(checkpoint, ignore_errors=True)
    return outcome
