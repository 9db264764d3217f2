"""The live half of ``bench.state``: what state costs a batch at a steady rate.

The backlog half shows how fast each contender drains; this one, what a pipeline
that is fed ``--rate`` (5,000) events/s live pays per batch with a 1 s trigger:
each Sluice contender (stateless KPI, de-duplication, unique visitors) gets a topic
of its own, its driver is started, and once its Spark session is up events are
produced at the rate for ``--warmup`` + ``--seconds``. The batches committed after
the warm-up (and after the driver's first batch, the JVM's warm-up, as the backlog
half leaves it out) and before producing ended are the figures (:func:`bench.state_figures.
steady`): batch time, state-read seconds and keys per batch, and whether the
contender kept up (``bench.pacing``). The driver is then stopped; what it left
unread is not waited for (the backlog half checks exactness).

Live events are all new (no re-sends), so the de-duplicating contender writes every
id it reads: its most expensive case.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from cassandra.cluster import Session

from bench import fixtures
from bench import state_figures as figures
from bench.batches import from_sluice
from bench.live import Pace, produce_paced
from bench.pacing import pacing
from bench.processes import JsonLines, start_driver
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.servers import spark as spark_artifact

TRIGGER_S: Final = 1.0
BEHIND_TRIGGERS: Final = 5.0
START_TIMEOUT: Final = 300.0

SpecOf = Callable[..., dict[str, Any]]
"""``(topic, keyspace, contender, per_partition=, trigger=)``: a contender's spec."""
Prepare = Callable[[Session, str], None]
"""Creates a contender's sink tables in a keyspace."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=5_000.0, help="live events/s")
    parser.add_argument("--seconds", type=float, default=40.0, help="measured live seconds")
    parser.add_argument("--warmup", type=float, default=10.0, help="live seconds left out")
    parser.add_argument(
        "--live-per-partition", type=int, default=2_500, help="cap per partition, live"
    )


def live(
    layout: Layout,
    args: argparse.Namespace,
    name: str,
    contender: Mapping[str, Any],
    spec_of: SpecOf,
    prepare: Prepare,
    index: int,
) -> figures.Steady:
    """``contender`` fed ``args.rate`` events/s: its figures. ``spec_of(topic,
    keyspace, contender, per_partition=, trigger=)`` is its pipeline spec;
    ``prepare(session, keyspace)`` creates its sink tables."""
    run = f"l{uuid.uuid4().hex[:8]}"
    topics = fixtures.Topics(fixtures.BOOTSTRAP)
    topic = topics.create(f"bench-state-live-{run}", 4)
    keyspace = f"bench_state_{run}_{name}"
    try:
        with fixtures.cassandra_session(fixtures.CONTACT) as session:
            fixtures.create_keyspace(session, keyspace, [])
            prepare(session, keyspace)
            try:
                return _fed(layout, args, name, contender, spec_of, topic, keyspace, index)
            finally:
                fixtures.drop_keyspace(session, keyspace)
    finally:
        topics.delete_all()


def _fed(
    layout: Layout,
    args: argparse.Namespace,
    name: str,
    contender: Mapping[str, Any],
    spec_of: SpecOf,
    topic: str,
    keyspace: str,
    index: int,
) -> figures.Steady:
    spec = spec_of(
        topic, keyspace, contender, per_partition=args.live_per_partition, trigger=TRIGGER_S
    )
    pipeline = f"live-{keyspace.replace('_', '-')}"
    child = start_driver(
        spec,
        pipeline,
        layout.stack / "bench-state" / pipeline,
        spark_artifact.job_image_env(layout),
    )
    lines = JsonLines(child.log)
    events: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not any(e.get("event") == "spark session started" for e in events):
            if child.exited() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name}: the driver did not start:\n{child.tail()}")
            time.sleep(0.5)  # polling the driver's log for its start
            events += lines.read_new()
        pace = Pace(args.rate, args.seconds, args.warmup, sample_every=10**9)
        began = time.time()
        produced = produce_paced(
            fixtures.BOOTSTRAP,
            topic,
            pace,
            EventFactory(seed=90 + index),
            lambda _id, _at: None,
        )
        if child.stop(120) != 0:
            raise RuntimeError(f"{name}: the driver did not stop cleanly:\n{child.tail()}")
    finally:
        child.kill()
    events += lines.read_new()
    records = [r for r in map(from_sluice, events) if r is not None]
    judged = pacing(
        records,
        produced=produced.events,
        produce_ended=produced.ended,
        rate=produced.rate,
        trigger_seconds=TRIGGER_S,
        behind_triggers=BEHIND_TRIGGERS,
        probes_missing=0,
    )
    first = min((r.ended for r in records if r.records), default=produced.ended)
    window = (max(began + args.warmup, first + 1e-3), produced.ended)  # past the JVM's warm-up
    return figures.steady(
        name,
        events,
        window=window,
        rate=produced.rate,
        behind_s=judged.lag_seconds,
        sustained=judged.sustained,
    )
