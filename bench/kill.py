"""The kill phase: a contender's driver SIGKILLed mid-run, restarted, and its output
checked the way the chaos soak checks Sluice's.

For each contender, on a fresh topic and table: the process starts (epoch 1) and
takes a priming batch; events are then produced at ``kill_rate`` for
``kill_seconds``; ``kill_after`` seconds in, the whole process group (driver, JVM,
Python workers) is SIGKILLed. The rows visible once it is gone are what the killed
driver wrote. The contender is started again on the same checkpoint (Sluice's rows
in Cassandra, the Spark queries' checkpoint directory) as epoch 2, the epoch every
write version carries in its last three digits (``sluice_job.write_order``), and
runs until every produced event has its row or ``drain_timeout`` passes. Then, from
the table (:func:`check`, pure):

* **missing**: produced events without a row (loss);
* **duplicates**: rows beyond the first for one event (``seq``); the sink is keyed by
  ``event_id``, so a re-written event replaces its row and this stays 0 unless a
  record lands under a second key;
* **re-written**: rows the killed driver had written that the restarted one wrote
  again (visible before the restart, epoch 2 now): what a sink that is not a keyed
  upsert (a Kafka topic, a counter, an append-only table) would hold twice.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from cassandra.cluster import Session

from bench import fixtures
from bench.contenders import Contender
from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from sluice_job.write_order import epoch_slot

RESTART_EPOCH: Final = 2
START_TIMEOUT: Final = 300.0


@dataclass(frozen=True)
class Row:
    event_id: str
    seq: int
    version: int


@dataclass(frozen=True)
class KillCheck:
    expected: int
    rows: int
    missing: int
    duplicates: int
    rewritten: int
    written_before_restart: int


@dataclass(frozen=True)
class KillRun:
    check: KillCheck
    killed_after: float
    """Seconds from the start of producing to the SIGKILL."""
    produced_before_kill: int
    restart_ready_seconds: float
    """From the SIGKILL to the restarted contender's start (claim or query start)."""
    caught_up_seconds: float | None
    """From the SIGKILL until every produced event had its row (``None``: never)."""


def check(expected: Iterable[int], before_restart: Iterable[str], rows: Iterable[Row]) -> KillCheck:
    """The output after a kill: ``expected`` sequence numbers, the ids visible before
    the restart, and the table's rows (version = the cell's write time)."""
    wanted = set(expected)
    seen: dict[int, int] = {}
    written = set(before_restart)
    rewritten = total = 0
    for row in rows:
        total += 1
        seen[row.seq] = seen.get(row.seq, 0) + 1
        if row.event_id in written and epoch_slot(row.version) == RESTART_EPOCH:
            rewritten += 1
    return KillCheck(
        expected=len(wanted),
        rows=total,
        missing=sum(1 for s in wanted if s not in seen),
        duplicates=sum(n - 1 for n in seen.values()),
        rewritten=rewritten,
        written_before_restart=len(written),
    )


def read_rows(session: Session, keyspace: str, table: str) -> list[Row]:
    """Every row of a kill table with its write version (a full scan, outside any
    timed window; the table holds one phase's events)."""
    result: Any = session.execute(
        f"SELECT event_id, seq, writetime(page) AS version FROM {keyspace}.{table}", timeout=120
    )
    return [Row(r.event_id, int(r.seq), int(r.version)) for r in result]


@dataclass(frozen=True)
class Plan:
    rate: float
    seconds: float
    kill_after: float
    drain_timeout: float
    seed: int


def measure(
    session: Session,
    keyspace: str,
    table: str,
    bootstrap: str,
    topic: str,
    plan: Plan,
    first: Contender,
    restart: Callable[[int], Contender],
    primed: range,
) -> KillRun:
    """Runs the kill phase on ``first``, started (epoch 1) and primed with the events
    ``primed``; ``restart(epoch)`` starts the contender again and returns once it is
    ready. The topic and table exist."""
    count = int(plan.rate * plan.seconds)
    stop = threading.Event()

    def producing() -> None:
        factory = EventFactory(plan.seed)
        produce(bootstrap, topic, count, rate=plan.rate, factory=factory, stop=stop)

    try:
        producer = threading.Thread(target=producing, daemon=True)
        began = time.monotonic()
        producer.start()
        first.wait(
            lambda _: time.monotonic() - began >= plan.kill_after,
            plan.kill_after + 60,
            "kill time",
        )
    except BaseException:
        stop.set()
        first.child.kill()
        raise
    first.child.kill()
    killed = time.monotonic()
    produced_before = int((killed - began) * plan.rate)
    before = [row.event_id for row in read_rows(session, keyspace, table)]
    second = restart(RESTART_EPOCH)
    ready = time.monotonic() - killed
    expected = [*range(count), *primed]
    caught_up: float | None = None
    try:
        producer.join(plan.seconds + 120)
        deadline = time.monotonic() + plan.drain_timeout
        while time.monotonic() < deadline:
            second.poll()
            if fixtures.count_rows(session, keyspace, table) >= len(expected):
                caught_up = time.monotonic() - killed
                break
            time.sleep(1.0)
    finally:
        stop.set()
        second.stop()
    rows = read_rows(session, keyspace, table)
    return KillRun(
        check(expected, before, rows),
        killed_after=killed - began,
        produced_before_kill=produced_before,
        restart_ready_seconds=ready,
        caught_up_seconds=caught_up,
    )


def results(run: KillRun | None) -> dict[str, Any] | None:
    """The phase's figures as plain JSON values."""
    if run is None:
        return None
    return {
        **dataclasses.asdict(run.check),
        "killed_after_seconds": round(run.killed_after, 2),
        "produced_before_kill": run.produced_before_kill,
        "restart_ready_seconds": round(run.restart_ready_seconds, 2),
        "caught_up_seconds": None
        if run.caught_up_seconds is None
        else round(run.caught_up_seconds, 2),
    }
