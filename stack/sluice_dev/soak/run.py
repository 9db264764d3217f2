"""One soak, start to end: the stack, the operator and the pipeline up; the
transactional producer started; the scheduled faults injected one after the other,
each followed until its next commit (one line per fault); then, once production has
ended and the pipeline has drained, the checks and the summary.

The pipeline and the operator are removed at the end (the servers stay up), so a
second soak starts clean: fresh topics, an empty sink table and no checkpoint.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final

from sluice_dev import stack
from sluice_dev.events import EventFactory
from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import Layout
from sluice_dev.produce import ensure_topic
from sluice_dev.servers.cassandra import CONTACT
from sluice_dev.servers.kafka import BOOTSTRAP
from sluice_dev.soak import checks, cluster, kafka, ledger, recovery, report, schedule
from sluice_dev.soak.faults import Chaos
from sluice_dev.soak.manifest import Target, manifest
from sluice_dev.soak.producer import Production, TransactionalProducer
from sluice_dev.soak.store import Store

SERVERS: Final = ("kube-controller-manager", "kube-scheduler", "node-agent", "kafka", "cassandra")
PARTITIONS: Final = 6
Say = Callable[[str], None]


class SoakError(RuntimeError):
    """The soak could not go on (a deadline passed); the message says what it waited for."""


@dataclass(frozen=True)
class Options:
    events: int = 500_000
    """Sequence numbers produced (committed and aborted), at least: production goes on
    at the same rate until the last fault has recovered."""
    faults: int = 21
    rate: float = 350.0
    """Events per second."""
    seed: int = 12
    spec_changes: int = 2
    standby: int = 0
    """Hot standbys of the pipeline (0 or 1); with 1, spec changes are warm handovers."""
    low_latency: bool = False
    """``trigger.mode: LowLatency`` instead of a 1 s trigger."""
    kinds: tuple[schedule.FaultKind, ...] = schedule.FAULT_KINDS
    bad_every: int = 20
    """Every n-th event malformed: 20 is 5 %."""
    abort_ratio: float = 0.10
    namespace: str = "sluice-soak"
    keyspace: str = "sluice_soak"
    recovery_timeout: float = 300.0
    drain_timeout: float = 600.0
    """How long the checkpoint may take to reach Kafka's last stable offsets once
    production has ended."""
    settle_seconds: float = 5.0
    """At least this long between one fault's recovery and the next fault."""


@dataclass
class Soak:
    layout: Layout
    options: Options
    say: Say
    target: Target = field(init=False)
    notes: list[str] = field(default_factory=list)
    faults: list[recovery.Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        stamp = datetime.now(UTC).strftime("%H%M%S")
        self.target = Target(
            namespace=self.options.namespace,
            name="soak",
            bootstrap=BOOTSTRAP,
            topic=f"soak-{stamp}",
            dead_letter_topic=f"soak-dlq-{stamp}",
            contact=CONTACT,
            keyspace=self.options.keyspace,
        )
        self.factory = EventFactory(seed=self.options.seed, bad_every=self.options.bad_every)

    def run(self) -> report.Summary:
        opts = self.options
        self.say("starting the servers the soak needs")
        stack.up(self.layout, SERVERS, say=lambda line: self.say(f"  {line}"))
        kubectl = Kubectl(self.layout)
        cluster.install_crd(kubectl)
        kubectl.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": opts.namespace}}
        )
        operator = cluster.Operator(self.layout, opts.namespace)
        pipeline = cluster.Pipeline(kubectl, self.target)
        key = self.target.checkpoint_key(kubectl.cluster_id())
        store = Store(self.target.contact, self.target.keyspace, key)
        try:
            operator.start()
            images = tuple(cluster.register_images(self.layout))
            return self._soak(kubectl, operator, pipeline, store, images)
        finally:
            self._tear_down(pipeline, operator)
            store.close()

    def _soak(
        self,
        kubectl: Kubectl,
        operator: cluster.Operator,
        pipeline: cluster.Pipeline,
        store: Store,
        images: tuple[str, ...],
    ) -> report.Summary:
        opts, target = self.options, self.target
        if pipeline.get() is not None:
            self.say("deleting the previous soak pipeline (its driver stops cleanly)")
            pipeline.delete(self.say)
        pipeline.collect_orphans(self.say)
        ensure_topic(target.bootstrap, target.topic, PARTITIONS)
        ensure_topic(target.bootstrap, target.dead_letter_topic, 1)
        store.reset()
        self.say(f"topic {target.topic} ({PARTITIONS} partitions), sink {target.keyspace}.events")
        kubectl.apply(manifest(target, images[0], opts.standby, low_latency=opts.low_latency))
        production = Production(
            target.bootstrap,
            target.topic,
            opts.events,
            opts.rate,
            self.factory,
            opts.seed,
            opts.abort_ratio,
        )
        producer = TransactionalProducer(production).start()
        try:
            return self._faults_and_checks(kubectl, operator, pipeline, store, images, producer)
        finally:
            producer.stop()

    def _faults_and_checks(
        self,
        kubectl: Kubectl,
        operator: cluster.Operator,
        pipeline: cluster.Pipeline,
        store: Store,
        images: tuple[str, ...],
        producer: TransactionalProducer,
    ) -> report.Summary:
        opts = self.options
        started = time.monotonic()
        self.say(
            f"producing {opts.events:,} events at {opts.rate:.0f}/s, transactional, "
            f"1 in {opts.bad_every} malformed, {opts.abort_ratio:.0%} of transactions aborted"
        )
        producer.extend()
        self._wait(lambda: (store.last_batch() or 0) >= 1, "the first commit", 300)
        began = time.monotonic()
        steps = schedule.plan(
            opts.seed,
            opts.faults,
            spec_changes=opts.spec_changes,
            kinds=opts.kinds,
            duration=max(60.0, opts.events / opts.rate - (began - started)),
        )
        self.say(f"{len(steps)} faults planned: " + ", ".join(s.kind.value for s in steps))
        chaos = Chaos(
            self.layout,
            kubectl,
            pipeline,
            operator,
            images,
            self._wait,
            opts.standby,
            opts.low_latency,
        )
        for step in steps:
            if not self._fault(step, began, chaos, pipeline, store, producer):
                break
        producer.finish()
        self.say(
            f"faults done; production ending at {max(producer.produced, opts.events):,} "
            "events; waiting for the pipeline to drain"
        )
        try:
            producer.wait(timeout=max(600.0, opts.events / opts.rate * 2))
        except (RuntimeError, TimeoutError) as err:
            raise SoakError(str(err)) from err
        stable = self._drained(store)
        return self._summary(store, producer, stable)

    def _fault(
        self,
        step: schedule.Step,
        began: float,
        chaos: Chaos,
        pipeline: cluster.Pipeline,
        store: Store,
        producer: TransactionalProducer,
    ) -> bool:
        """Inject one fault once it is due and the pipeline runs; follow it to its next
        commit. False if the soak cannot go on injecting faults."""
        while time.monotonic() - began < step.due:
            time.sleep(0.5)
        try:
            self._wait(
                lambda: (pipeline.status() or {}).get("phase") == "Running",
                "the pipeline Running",
                self.options.recovery_timeout,
            )
        except SoakError as err:
            self.notes.append(f"faults stopped before fault {step.number}: {err}")
            return False
        if self.options.standby:  # measured as a user runs it: with the standby Ready
            try:
                self._wait(
                    pipeline.standby_ready, "the hot standby Ready", self.options.recovery_timeout
                )
            except SoakError as err:
                self.notes.append(f"fault {step.number} injected without a Ready standby: {err}")
        time.sleep(self.options.settle_seconds)
        before = store.last_batch() or 0
        injected = chaos.inject(step)
        found = self._follow(injected.fault, before, pipeline, store)
        self.faults.append(found.fault)
        self.say(f"{found.line()}  [produced {producer.produced:,}]")
        if injected.undo is not None:
            injected.undo()
        return found.commit is not None

    def _follow(
        self, fault: recovery.Fault, before: int, pipeline: cluster.Pipeline, store: Store
    ) -> recovery.Recovery:
        """Poll the batch history until the commit that ends ``fault``; give up at the
        deadline, or at once if the pipeline went ``Failed`` (noted either way)."""
        deadline = time.monotonic() + self.options.recovery_timeout
        load = os.getloadavg()[0]
        found = recovery.recovery(fault, [])
        polls = 0
        while found.commit is None:
            load = max(load, os.getloadavg()[0])
            if time.monotonic() > deadline:
                self.notes.append(
                    f"fault {fault.number} ({fault.kind}): no commit within "
                    f"{self.options.recovery_timeout:.0f}s; no further faults injected"
                )
                break
            polls += 1
            if polls % 10 == 0 and (pipeline.status() or {}).get("phase") == "Failed":
                self.notes.append(
                    f"fault {fault.number} ({fault.kind}): the pipeline went Failed; "
                    "no further faults injected"
                )
                break
            time.sleep(0.5)
            found = recovery.recovery(fault, store.commits_after(before) or [])
        return replace(found, fault=replace(fault, load=load))

    def _drained(self, store: Store) -> dict[int, int]:
        """Kafka's last stable offsets, once the checkpoint holds them (or a note)."""
        target = self.target
        stable, held = drained(
            lambda: kafka.last_stable_offsets(target.bootstrap, target.topic),
            store.committed,
            self.options.drain_timeout,
        )
        if not held:
            self.notes.append(
                f"timed out after {self.options.drain_timeout:.0f}s waiting for the "
                "checkpoint to reach the last stable offsets"
            )
        return stable

    def _summary(
        self, store: Store, producer: TransactionalProducer, stable: dict[int, int]
    ) -> report.Summary:
        self.say("checking the sink, the dead letters, the history and the offsets")
        target = self.target
        visible = kafka.visible_seqs(target.bootstrap, target.topic)
        settled = producer.ledger.resolve(visible)
        book = producer.ledger
        seen = set(visible)
        mismatches = sum(1 for s in book.seqs(ledger.Outcome.COMMITTED) if s not in seen)
        mismatches += sum(1 for s in book.seqs(ledger.Outcome.ABORTED) if s in seen)
        expect = ledger.expectation(book, self.factory)
        history = store.history()
        commits, claims = store.commits(), store.claims()
        committed = store.committed() or {}
        recoveries = [recovery.recovery(fault, commits, claims) for fault in self.faults]
        return report.Summary(
            production=report.Production(
                sequence_numbers=producer.produced,
                committed=book.count(ledger.Outcome.COMMITTED),
                aborted=book.count(ledger.Outcome.ABORTED),
                malformed_committed=len(expect.rejected),
                settled_unknown=settled,
                ledger_mismatches=mismatches,
            ),
            chain=checks.chain(history, {p: 0 for p in range(PARTITIONS)}, committed),
            sink=checks.sink(expect, store.sink_seqs()),
            dead_letters=checks.dead_letters(
                expect, kafka.dead_letters(target.bootstrap, target.dead_letter_topic)
            ),
            offsets_off=checks.offsets_off(committed, stable),
            recoveries=recoveries,
            records_per_second=report.records_per_second(commits),
            standby=self.options.standby,
            low_latency=self.options.low_latency,
            notes=tuple(self.notes),
        )

    def _tear_down(self, pipeline: cluster.Pipeline, operator: cluster.Operator) -> None:
        try:
            if pipeline.get() is not None:
                pipeline.delete(self.say)
        finally:
            operator.stop()

    def _wait(self, check: Callable[[], object], what: str, timeout: float) -> object:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise SoakError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.5)


def drained(
    stable: Callable[[], dict[int, int]],
    committed: Callable[[], dict[int, int] | None],
    timeout: float,
    poll: float = 0.5,
) -> tuple[dict[int, int], bool]:
    """Wait until the checkpoint holds Kafka's last stable offsets, both read afresh at
    every poll: the last stable offset still moves after production has ended (a
    transaction the broker aborts once its timeout passes, e.g. one left open by a
    broker restart, moves it past the abort marker, and the driver follows). The last
    stable offsets last read, and whether the checkpoint held them."""
    deadline = time.monotonic() + timeout
    while True:
        offsets = stable()
        if committed() == offsets:
            return offsets, True
        if time.monotonic() > deadline:
            return offsets, False
        time.sleep(poll)


def run(layout: Layout, options: Options, say: Say) -> report.Summary:
    """Run one soak and print its summary; the caller decides the exit code."""
    summary = Soak(layout, options, say).run()
    print(flush=True)
    for line in summary.lines():
        print(line, flush=True)
    return summary
