"""The ceiling: how fast a standalone client gets the benchmark's rows into Cassandra.

The contenders' throughput means little without knowing what the local Cassandra
takes at best from a client that does nothing else. So each run of ``make bench``
also writes, on its own (never while a contender runs), ``--ceiling-rows`` rows
(default: the backlog's event count) into table ``ceiling`` of the run's keyspace,
which has the contenders' table shape (``bench.fixtures.EVENTS_TABLE``):

* the rows are the events transform's output for the backlog's events
  (``sluice_dev.events.EventFactory``, page normalised, ``event_time`` a timestamp,
  a source topic, partition and offset), generated in memory before the clock starts;
* ``--ceiling-processes`` child processes (default: the CPU count), each with its own
  session opened as the product opens it (``sluice_job.cassandra_session.connect``:
  token-aware, protocol v5, libev) and a contiguous share of the rows;
* each row bound to ``INSERT ... USING TIMESTAMP ?`` with a write version, like the
  sink; rows grouped by their replica set (``cluster.metadata.get_replicas`` of the
  bound row's routing key) into UNLOGGED batches of at most ``--ceiling-batch-rows``
  rows and, unless one row alone is larger, at most ``--ceiling-batch-bytes`` bytes
  as the sink estimates them (the sink's own grouping,
  ``sluice_job.sinks.cassandra_batches.grouped``: values' serialized lengths plus a
  cell timestamp each);
* at most ``--ceiling-concurrency`` requests in flight per process
  (``cassandra.concurrent.execute_concurrent``). A failed batch is retried (after the
  others, one at a time; retries are counted) so that one timeout under load does not
  void the figure.

Rows/s = rows / (last acknowledgement - first write), over all processes (every
process starts writing at one signal, after its rows are generated and its session
is open). ``SELECT count(*)`` afterwards (per token range) checks every row is there.

What was measured (``python -m bench.ceiling``, November 2026, this 2-CPU machine,
the first pass with 100,000 rows per point, then the leading points again with
300,000; a second stack idled beside it, so figures move by +-15 % between runs):
rows/s by rows per batch, requests in flight per process and processes

===================  ==========  ==========  ==========
100,000 rows             32          64          128
===================  ==========  ==========  ==========
1 process, 10 rows      16,831      18,886      22,109
1 process, 20 rows      19,484      25,557      28,946
1 process, 50 rows      27,009      33,034      40,218
2 processes, 10 rows    29,322      24,400      28,761
2 processes, 20 rows    37,839      29,044      30,620
2 processes, 50 rows    40,901      47,397      43,340
===================  ==========  ==========  ==========

300,000 rows: 2 processes x 64, 50 rows: 37,507; x 32: 35,569; x 128: 35,193;
1 process x 128, 50 rows: 38,002; 2 x 32, 20 rows: 33,017; 2 x 32, 10 rows: 24,527;
2 x 128, 10 rows: 25,364; (beyond the sweep) 2 x 64, 100 rows: 40,687. An earlier
probe with one prepared INSERT per row (no batch) at concurrency 512: about 5,300.

So batches of 50 rows put 1.4-1.9 times as many rows per second into the table as
batches of 10, which is why the default crosses Cassandra's
``unlogged_batch_across_partitions_warn_threshold`` (10: every row here is its own
partition; Cassandra logs that once in a while, rate-limited). Bytes: a row's
serialized values are 92-101 bytes (97 on average; 169 with the sink's estimate of
nine cell timestamps), so 50 rows are about 8,450 estimated bytes, below the 9,000
bound (these figures were taken with the values alone against a 5,000 bound, which
cuts at the same 50 rows); Cassandra itself counts
the batch (its mutations, with cell timestamps and key framing) as 13.4 KiB and logs a
``batch_size_warn_threshold`` (5 KiB) warning for each one, far below the 50 KiB
failure threshold: a batch of 20 rows already counts 5.4 KiB there, so only batches of
18 rows or fewer stay silent, and 20 rows measured 7-39 % slower than 50 at the same
processes and concurrency. One process or
two, 32, 64 or 128 in flight: within the noise at 50 rows. Defaults: 50 rows, at most
9,000 estimated bytes, 64 in flight, one process per CPU.

``python -m bench.ceiling --rows N --processes P --concurrency C --batch-rows R`` runs
one measurement on its own (keyspace ``bench_ceiling``, dropped afterwards).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.synchronize import Event as EventType
from typing import Any, Final

from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType, BoundStatement, PreparedStatement

from bench.fixtures import (
    BACKLOG_SEED,
    CONTACT,
    cassandra_session,
    count_rows,
    create_keyspace,
    drop_keyspace,
)
from sluice_dev.events import EventFactory, normalised_page
from sluice_job.cassandra_session import connect
from sluice_job.sinks.cassandra_batches import Bounds, estimated_size, grouped
from sluice_job.write_order import next_version, write_version

TABLE: Final = "ceiling"
COLUMNS: Final = (
    "event_id",
    "seq",
    "page",
    "action",
    "user_id",
    "event_time",
    "source_topic",
    "source_partition",
    "source_offset",
)
"""The events transform's output columns, in the order :func:`row_values` gives them."""
EPOCH: Final = 1
START_TIMEOUT: Final = 300.0
"""Seconds a child may take to open its session and generate its rows."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    """How the ceiling writes: per process, ``concurrency`` requests in flight of at
    most ``batch_rows`` rows and ``batch_bytes`` bytes each."""

    rows: int
    processes: int
    concurrency: int = 64
    batch_rows: int = 50
    batch_bytes: int = 9_000
    """Bytes of serialized values, below Cassandra's ``batch_size_warn_threshold``
    (5 KiB); Cassandra's own count of a batch is larger (see above)."""

    def __post_init__(self) -> None:
        if min(self.rows, self.processes, self.concurrency, self.batch_rows, self.batch_bytes) < 1:
            raise ValueError(f"every figure of a ceiling plan must be positive: {self}")


def row_values(factory: EventFactory, seq: int, topic: str, partitions: int) -> tuple[Any, ...]:
    """The events transform's output row for event ``seq``, in :data:`COLUMNS` order
    (the event as the backlog holds it; partition and offset as if keyed round-robin)."""
    event = factory.event(seq)
    millis = int(str(event["ts"]))
    return (
        event["event_id"],
        seq,
        normalised_page(str(event["page"])),
        str(event["action"]).strip().lower(),
        event["user_id"],
        datetime.fromtimestamp(millis / 1000.0, UTC),
        topic,
        seq % partitions,
        seq // partitions,
    )


def shares(rows: int, processes: int) -> list[range]:
    """``rows`` sequence numbers cut into ``processes`` contiguous ranges whose sizes
    differ by at most one (empty ranges left out)."""
    size, extra = divmod(rows, processes)
    result, start = [], 0
    for index in range(processes):
        end = start + size + (1 if index < extra else 0)
        if end > start:
            result.append(range(start, end))
        start = end
    return result


@dataclass(frozen=True)
class Written:
    """One process's share: when its first write went out and its last was
    acknowledged (epoch seconds), what it wrote, what had to be retried."""

    began: float
    ended: float
    rows: int
    batches: int
    retries: int


@dataclass(frozen=True)
class CeilingRun:
    plan: Plan
    written: list[Written]
    rows_in_table: int | None

    @property
    def rows(self) -> int:
        return sum(w.rows for w in self.written)

    @property
    def seconds(self) -> float:
        if not self.written:
            return 0.0
        return max(w.ended for w in self.written) - min(w.began for w in self.written)

    @property
    def records_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def results(run: CeilingRun | None) -> dict[str, Any] | None:
    """The ceiling's figures as plain JSON values."""
    if run is None:
        return None
    return {
        "records_per_second": round(run.records_per_second, 1),
        "rows": run.rows,
        "seconds": round(run.seconds, 3),
        "rows_in_table": run.rows_in_table,
        "verified": run.rows_in_table == run.rows if run.rows_in_table is not None else None,
        "processes": run.plan.processes,
        "concurrency_per_process": run.plan.concurrency,
        "batch_rows_max": run.plan.batch_rows,
        "batch_bytes_max": run.plan.batch_bytes,
        "batches": sum(w.batches for w in run.written),
        "retries": sum(w.retries for w in run.written),
    }


# -- the child processes ------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One child's share of the work (sent to a spawned process: plain values only)."""

    contact: str
    keyspace: str
    table: str
    seqs: range
    topic: str
    partitions: int
    version: int
    plan: Plan


def _insert(keyspace: str, table: str) -> str:
    marks = ", ".join("?" for _ in COLUMNS)
    return (
        f"INSERT INTO {keyspace}.{table} ({', '.join(COLUMNS)}) VALUES ({marks}) USING TIMESTAMP ?"
    )


def _batch(statements: list[BoundStatement]) -> BatchStatement:
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    for statement in statements:
        batch.add(statement)
    return batch


def write_share(
    session: Session, statement: PreparedStatement, job: Job, rows: list[tuple[Any, ...]]
) -> Written:
    """Writes ``rows``: the timed part of a child's work."""
    metadata = session.cluster.metadata
    plan = job.plan
    bound = (statement.bind((*row, job.version)) for row in rows)
    keyed = (
        (tuple(metadata.get_replicas(job.keyspace, b.routing_key)), estimated_size(b.values), b)
        for b in bound
    )
    sent: deque[BatchStatement] = deque()
    failed: list[BatchStatement] = []

    def requests() -> Iterator[tuple[BatchStatement, None]]:
        for group in grouped(keyed, Bounds(plan.batch_rows, plan.batch_bytes)):
            batch = _batch(group)
            sent.append(batch)
            yield batch, None

    began = time.time()
    batches = 0
    for success, _result in execute_concurrent(
        session,
        requests(),
        concurrency=plan.concurrency,
        raise_on_first_error=False,
        results_generator=True,
    ):
        batch = sent.popleft()  # results come in the order the requests went out
        batches += 1
        if not success:
            failed.append(batch)
    retries = 0
    for batch in failed:
        for attempt in range(1, 6):
            retries += 1
            try:
                session.execute(batch, timeout=60)
                break
            except Exception:
                if attempt == 5:
                    raise
    return Written(began, time.time(), len(rows), batches, retries)


def child(job: Job, ready: Any, go: EventType, done: Any) -> None:
    """A child process: session and rows first, then, at the signal, the writes."""
    try:
        cluster, session = connect([job.contact], None, timeout=30)
        statement = session.prepare(_insert(job.keyspace, job.table))
        factory = EventFactory(BACKLOG_SEED)  # the backlog's events, as rows
        rows = [row_values(factory, seq, job.topic, job.partitions) for seq in job.seqs]
        ready.put(os.getpid())
        go.wait()
        done.put(write_share(session, statement, job, rows))
        cluster.shutdown()
    except BaseException as err:
        ready.put(os.getpid())
        done.put(f"{type(err).__name__}: {err}")
        raise


class CeilingFailedError(RuntimeError):
    """A ceiling process failed; the message says why."""


def write_all(
    contact: str, keyspace: str, plan: Plan, topic: str, partitions: int
) -> list[Written]:
    """Runs the plan in child processes (spawned: the parent's driver threads must not
    be forked) and returns each one's figures."""
    context = multiprocessing.get_context("spawn")
    ready, done = context.Queue(), context.Queue()
    go = context.Event()
    version = write_version(next_version(0, time.time()), EPOCH)
    jobs = [
        Job(contact, keyspace, TABLE, seqs, topic, partitions, version, plan)
        for seqs in shares(plan.rows, plan.processes)
    ]
    children = [context.Process(target=child, args=(job, ready, go, done)) for job in jobs]
    for process in children:
        process.start()
    try:
        for _ in children:
            ready.get(timeout=START_TIMEOUT)
        go.set()
        found: list[Written] = []
        for _ in children:
            outcome = done.get(timeout=START_TIMEOUT + 3600)
            if not isinstance(outcome, Written):
                raise CeilingFailedError(f"a ceiling process failed: {outcome}")
            found.append(outcome)
        return found
    except queue.Empty as err:
        raise CeilingFailedError("a ceiling process did not answer in time") from err
    finally:
        for process in children:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join(10)


def measure(
    session: Session,
    contact: str,
    keyspace: str,
    plan: Plan,
    *,
    topic: str,
    partitions: int,
    verify: bool,
    say: Say,
) -> CeilingRun:
    """The ceiling in ``keyspace``'s table ``ceiling`` (which must exist); rows as if
    they came from ``topic``'s ``partitions``."""
    written = write_all(contact, keyspace, plan, topic, partitions)
    rows = count_rows(session, keyspace, TABLE) if verify else None
    run = CeilingRun(plan, written, rows)
    say(
        f"ceiling: {run.rows:,} rows in {run.seconds:.1f}s = {run.records_per_second:,.0f} rows/s "
        f"({plan.processes} processes x {plan.concurrency} in flight, batches <= "
        f"{plan.batch_rows} rows / {plan.batch_bytes:,} bytes); rows in table: "
        f"{rows if rows is not None else '-'}"
    )
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__)
    parser.add_argument("--contact", default=CONTACT)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--concurrency", type=int, default=Plan.concurrency)
    parser.add_argument("--batch-rows", type=int, default=Plan.batch_rows)
    parser.add_argument("--batch-bytes", type=int, default=Plan.batch_bytes)
    args = parser.parse_args(argv)
    plan = Plan(args.rows, args.processes, args.concurrency, args.batch_rows, args.batch_bytes)
    keyspace = "bench_ceiling"
    with cassandra_session(args.contact) as session:
        drop_keyspace(session, keyspace)
        create_keyspace(session, keyspace, [TABLE])
        try:
            topic = "bench-0000000000000000-backlog"
            measure(
                session,
                args.contact,
                keyspace,
                plan,
                topic=topic,
                partitions=8,
                verify=True,
                say=print,
            )
        finally:
            drop_keyspace(session, keyspace)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
