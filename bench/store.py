"""The checkpoint store alone: what a batch's two LWTs cost without Spark around them.

``python -m bench.store [--contact HOST:PORT] [--batches N]`` claims a fresh pipeline
in keyspace ``bench_store`` and runs N batches of plan LWT + commit LWT + history row
(the calls the driver makes per batch, on 8 partitions), then prints batches/s and
the p50/p99 of each LWT. It isolates the store from the CPU contention of a running
Spark job, which the in-loop figures of ``make bench`` include.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from bench.stats import Summary
from sluice_job.cassandra_session import connect
from sluice_job.checkpoint import Batch, CheckpointStore
from sluice_job.offsets import OffsetRange, TopicPartition

PARTITIONS = 8
RECORDS = 100


KEYSPACE = "bench_store"


def claimed(session: Any) -> CheckpointStore:
    """A fresh pipeline's store in :data:`KEYSPACE`, its first epoch claimed."""
    store = CheckpointStore(session, KEYSPACE, f"p-{time.time_ns()}", "bench")
    store.ensure_schema("{'class': 'SimpleStrategy', 'replication_factor': 1}")
    store.claim(1)
    return store


def batches(count: int) -> Iterator[Batch]:
    """``count`` planned batches in a row, :data:`RECORDS` per partition each."""
    positions = {TopicPartition("t", p): 0 for p in range(PARTITIONS)}
    for batch_id in range(1, count + 1):
        ranges = tuple(OffsetRange(tp, at, at + RECORDS) for tp, at in positions.items())
        positions = {tp: at + RECORDS for tp, at in positions.items()}
        yield Batch(batch_id, ranges, dict(positions))


def run(contact: str, count: int) -> str:
    cluster, session = connect([contact], None)
    try:
        store = claimed(session)
        plans: list[float] = []
        commits: list[float] = []
        began = time.perf_counter()
        for batch in batches(count):
            started = time.perf_counter()
            store.plan(batch)
            plans.append(time.perf_counter() - started)
            commits.append(store.commit(batch, datetime.now(UTC)))
        elapsed = time.perf_counter() - began
    finally:
        cluster.shutdown()

    plan, commit = Summary.of_seconds(plans), Summary.of_seconds(commits)
    assert plan is not None
    assert commit is not None
    return (
        f"{count / elapsed:.0f} batches/s; plan LWT p50 {plan.p50_ms} p99 {plan.p99_ms} ms; "
        f"commit LWT p50 {commit.p50_ms} p99 {commit.p99_ms} ms"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__)
    parser.add_argument(
        "--contact", default=os.environ.get("SLUICE_CASSANDRA_CONTACT", "127.0.0.1:19042")
    )
    parser.add_argument("--batches", type=int, default=500)
    args = parser.parse_args(argv)
    print(run(args.contact, args.batches))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
