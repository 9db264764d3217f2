"""Where the commit LWT's tail comes from: the client's share against the server's, and
the server's share by Paxos step, from Cassandra's own query traces.

Why it exists (issue 40, item 4): the commit p99 is 25-67 ms in `make bench` runs
(target 20 ms) while its p50 is a few milliseconds, and the store alone on an idle
machine has a p99 of 3-6 ms. A trace of a commit says how long the coordinator spent
on it (``system_traces.sessions.duration``) and when each step happened (its events'
``source_elapsed``); the rest of what the driver waited is the client's: its event
loop, the GIL, the socket, the scheduler. ``python -m bench.commit_tail`` runs the
driver's checkpoint store (``bench.store``'s plan, commit and history row per batch),
traces every commit, and prints, per condition, the distribution of the commit as the
driver measured it, the server's duration and the difference, plus a text histogram
and the slowest commits' Paxos steps. The conditions are the machine as it is, and
with ``--busy N`` processes spinning on the cores beside it (what a Spark job's tasks
and Python workers do to a Cassandra node on the same two cores). Tracing writes to
``system_traces`` after each traced query, which costs the server a little; the
figures compare conditions within one run.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.query import QueryTrace

from bench import store
from bench.stats import percentile
from sluice_job import checkpoint_cql
from sluice_job.cassandra_session import connect

BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200)
"""Upper bounds of the histogram's buckets; the last bucket takes the rest."""
STEPS = ("Preparing", "Promising", "Accepting", "Proposing", "Committing", "Read", "Appending")
"""Words that start the trace events of an LWT's Paxos steps (v1 and v2 name them
differently); an event that starts with none of them is reported as it is."""


@dataclass(frozen=True)
class Sample:
    """One traced commit: what the driver waited, what the coordinator spent, and the
    coordinator's events as (seconds since the start, description)."""

    client_s: float
    server_s: float | None
    events: tuple[tuple[float, str], ...]

    @property
    def outside_s(self) -> float | None:
        """The client's share: waited but not spent by the coordinator."""
        return None if self.server_s is None else max(0.0, self.client_s - self.server_s)


class TracingSession:
    """The driver's session, with every commit LWT traced; the rest passes through."""

    def __init__(self, session: Any, keyspace: str) -> None:
        self._session = session
        self._commit_cql = checkpoint_cql.statements(keyspace)["commit"]
        self.trace_ids: list[tuple[float, Any]] = []
        self._commit: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def prepare(self, query: str) -> Any:
        statement = self._session.prepare(query)
        if query == self._commit_cql:
            self._commit = statement
        return statement

    def execute(self, query: Any, parameters: Any = None, **kwargs: Any) -> Any:
        if query is not self._commit:
            return self._session.execute(query, parameters, **kwargs)
        started = time.perf_counter()
        result = self._session.execute(query, parameters, trace=True, **kwargs)
        waited = time.perf_counter() - started
        for trace_id in result.response_future.get_query_trace_ids():
            self.trace_ids.append((waited, trace_id))
        return result


def _spin(until: float, niceness: int) -> None:
    os.nice(niceness)
    while time.time() < until:
        pass


@contextmanager
def busy(processes: int, seconds: float, niceness: int = 0) -> Iterator[None]:
    """``processes`` processes spinning on the CPU for at most ``seconds``, at
    ``niceness`` (0: the priority of the store's client and of the node)."""
    until = time.time() + seconds
    spinners = [
        multiprocessing.Process(target=_spin, args=(until, niceness)) for _ in range(processes)
    ]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join()


def commits(contact: str, count: int) -> list[Sample]:
    """``count`` batches of plan, commit and history row on a fresh pipeline, every
    commit traced; its samples."""
    cluster, session = connect([contact], None)
    try:
        traced = TracingSession(session, store.KEYSPACE)
        checkpoints = store.claimed(traced)
        for batch in store.batches(count):
            checkpoints.plan(batch)
            checkpoints.commit(batch, datetime.now(UTC))
        return [_sample(session, waited, trace_id) for waited, trace_id in traced.trace_ids]
    finally:
        cluster.shutdown()


def _sample(session: Any, waited: float, trace_id: Any) -> Sample:
    trace = QueryTrace(trace_id, session)
    try:
        # system_traces has a replication factor of 2: one node answers at ONE only.
        trace.populate(max_wait=10.0, query_cl=ConsistencyLevel.ONE)
    except Exception:  # a trace not written in time: the client figure stands alone
        return Sample(waited, None, ())
    events = tuple(
        (event.source_elapsed.total_seconds(), str(event.description))
        for event in trace.events
        if event.source_elapsed is not None
    )
    return Sample(waited, trace.duration.total_seconds() if trace.duration else None, events)


def histogram(values_ms: Sequence[float]) -> str:
    """A text histogram of ``values_ms`` over :data:`BUCKETS_MS`."""
    bounds = (0.0, *BUCKETS_MS, float("inf"))
    counts = [
        sum(1 for v in values_ms if low < v <= high) for low, high in itertools.pairwise(bounds)
    ]
    widest = max(counts) or 1
    lines = []
    for (low, high), count in zip(itertools.pairwise(bounds), counts, strict=True):
        label = f"<= {high:g} ms" if high != float("inf") else f"> {low:g} ms"
        lines.append(f"    {label:>11} {count:5d} {'#' * round(40 * count / widest)}")
    return "\n".join(lines)


def step(description: str) -> str:
    """The Paxos step a trace event belongs to (its first word, if it is one)."""
    first = description.split(" ", 1)[0]
    return first if first in STEPS else description[:60]


def report(name: str, samples: Sequence[Sample], slowest: int = 3) -> str:
    """Distribution of the client's, the server's and the client's own share of the
    commit, a histogram of each, and the slowest commits' steps."""
    lines = [f"{name}: {len(samples)} commits traced"]
    series = {
        "driver waited": [s.client_s * 1000 for s in samples],
        "coordinator spent": [s.server_s * 1000 for s in samples if s.server_s is not None],
        "outside the coordinator": [s.outside_s * 1000 for s in samples if s.outside_s is not None],
    }
    for label, values in series.items():
        if not values:
            continue
        lines.append(
            f"  {label:<24} p50 {percentile(values, 50):6.2f}  p90 {percentile(values, 90):6.2f}  "
            f"p99 {percentile(values, 99):6.2f}  max {max(values):7.2f} ms"
        )
        lines.append(histogram(values))
    for sample in sorted(samples, key=lambda s: s.client_s, reverse=True)[:slowest]:
        server = "?" if sample.server_s is None else f"{sample.server_s * 1000:.1f}"
        steps = ", ".join(f"{step(d)} @{t * 1000:.1f}" for t, d in sample.events)
        lines.append(
            f"  slow: waited {sample.client_s * 1000:.1f} ms, coordinator {server} ms: {steps}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.commit_tail", description=__doc__)
    parser.add_argument(
        "--contact", default=os.environ.get("SLUICE_CASSANDRA_CONTACT", "127.0.0.1:19042")
    )
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument(
        "--busy", type=int, default=2, help="spinning processes of the second condition"
    )
    parser.add_argument(
        "--busy-nice",
        type=int,
        default=10,
        help="a third condition: the spinners at this niceness, as the driver runs Spark "
        "(0: no third condition)",
    )
    args = parser.parse_args(argv)
    print(report("as the machine is", commits(args.contact, args.batches)))
    if args.busy:
        with busy(args.busy, seconds=600):
            samples = commits(args.contact, args.batches)
        print(report(f"beside {args.busy} spinning processes", samples))
    if args.busy and args.busy_nice:
        with busy(args.busy, seconds=600, niceness=args.busy_nice):
            samples = commits(args.contact, args.batches)
        print(report(f"beside {args.busy} spinning processes at nice {args.busy_nice}", samples))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
