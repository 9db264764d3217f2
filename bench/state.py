"""``python -m bench.state`` (``make bench-state``; ``make bench`` runs it too): what
keyed state costs a batch, issue 41's first measure.

Each run: one Kafka topic holding a backlog of ``--events`` sample events, a
``--resent`` share of them sent again (same id, later offsets) and one event far in
the future (its watermark closes every window); five contenders drain it in turn,
each with its own checkpoint and sink table, batches of ``--per-partition`` records
per partition:

* ``kpi`` (stateless): ``sluice_job.examples.kpi``, partial rows per batch;
* ``dedup`` (keyed state, one lookup and, for a new id, one write per event id):
  ``sluice_job.examples.dedup``;
* ``visitors`` (a window state: one lookup and one write per page and window touched,
  the open-windows index): ``sluice_job.examples.unique_visitors``, 60-second windows,
  late records counted;
* ``ss-dedup`` and ``ss-visitors``: Structured Streaming doing the same with its own
  state store (``dropDuplicatesWithinWatermark``, ``approx_count_distinct`` per
  window), batches of the same size (:mod:`bench.structured_state`).

Then the live half (:mod:`bench.state_steady`, ``--skip-live`` to leave it out):
each Sluice contender fed ``--rate`` (5,000) events/s with a 1 s trigger, its
batches' time and state reads per batch, and whether it kept up.

Each contender's output is checked: the KPI sums count every record (re-sent ones
twice), the de-duplicated sums each event once, and each window's visitors are its
distinct users. Figures come from the drivers' ``batch`` log events, the first batch
left out (:mod:`bench.state_figures`); ``--runs`` (3) runs, medians to
``bench/results/<stamp>-state.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from cassandra.cluster import Session
from confluent_kafka import Consumer, TopicPartition

from bench import fixtures, state_steady
from bench import state_figures as figures
from bench.files import write
from bench.processes import Child, JsonLines, start_driver
from bench.settings import RESULTS
from sluice_dev.events import EventFactory, normalised_page
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.produce import produce
from sluice_dev.servers import spark as spark_artifact

PARTITIONS: Final = 4
WINDOW_S: Final = 60
FLUSH_SEQ: Final = 10_000_000
"""The far-future event: 100,000 s of event time after the first."""
DRAIN_TIMEOUT: Final = 1_800.0
KPI_TABLE: Final = """CREATE TABLE {ks}.page_kpis (page text, window_start timestamp,
    batch_id bigint, views bigint, clicks bigint, events bigint,
    PRIMARY KEY ((page, window_start), batch_id))"""
VISITORS_TABLE: Final = """CREATE TABLE {ks}.page_visitors (page text,
    window_start timestamp, visitors int, views bigint, PRIMARY KEY ((page), window_start))"""


def say(line: str) -> None:
    print(f"bench-state: {line}", flush=True)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.state", description=__doc__)
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--resent", type=float, default=0.2)
    parser.add_argument("--per-partition", type=int, default=1_250)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--skip-live", action="store_true", help="the backlog half only")
    parser.add_argument("--live-only", action="store_true", help="the live half only")
    state_steady.add_arguments(parser)
    return parser.parse_args(argv)


def contenders() -> dict[str, dict[str, Any]]:
    """Each contender's transform section and sink table."""
    seen = {"name": "seen", "table": "seen_events", "key": [{"name": "event_id", "type": "text"}]}
    visitors = {
        "name": "visitors",
        "table": "page_window_visitors",
        "key": [{"name": "page", "type": "text"}, {"name": "window_start", "type": "timestamp"}],
        "columns": [{"name": "users", "type": "set<text>"}],
        "window": {"start": "window_start", "sizeSeconds": WINDOW_S},
    }
    return {
        "kpi": {"transform": {"entrypoint": "sluice_job.examples.kpi:transform"}},
        "dedup": {
            "transform": {"entrypoint": "sluice_job.examples.dedup:transform", "state": [seen]}
        },
        "visitors": {
            "table": "page_visitors",
            "transform": {
                "entrypoint": "sluice_job.examples.unique_visitors:transform",
                "eventTime": {"allowedLatenessSeconds": 5, "late": "Count"},
                "state": [visitors],
            },
        },
    }


STRUCTURED: Final = {"ss-dedup": "dedup", "ss-visitors": "visitors"}
"""Structured Streaming's contenders, and the Sluice contender each is checked as."""
APPROXIMATE: Final = frozenset({"ss-visitors"})
"""Contenders whose output is approximate by design (``approx_count_distinct``): their
windows are checked and reported, and a miss does not fail the benchmark."""


def one_run(layout: Layout, args: argparse.Namespace, index: int) -> list[figures.Drain]:
    run = f"s{uuid.uuid4().hex[:8]}"
    factory = EventFactory(seed=70 + index)
    topics = fixtures.Topics(fixtures.BOOTSTRAP)
    topic = topics.create(f"bench-state-{run}", PARTITIONS)
    resent = int(args.events * args.resent)
    seqs = [*range(args.events), *range(resent), FLUSH_SEQ]
    say(f"run {index + 1}: {len(seqs):,} records ({resent:,} re-sent) to {topic}")
    produce(fixtures.BOOTSTRAP, topic, args.events, factory=factory)
    produce(fixtures.BOOTSTRAP, topic, resent, factory=factory)
    produce(fixtures.BOOTSTRAP, topic, 1, start=FLUSH_SEQ, factory=factory)
    found = []
    try:
        with fixtures.cassandra_session(fixtures.CONTACT) as session:
            for name, contender in [*contenders().items(), *((n, {}) for n in STRUCTURED)]:
                keyspace = f"bench_state_{run}_{name.replace('-', '_')}"
                fixtures.create_keyspace(session, keyspace, [])
                sink_tables(session, keyspace)
                try:
                    if name in STRUCTURED:
                        events = structured(layout, args, topic, keyspace, STRUCTURED[name])
                    else:
                        events = drive(layout, args, topic, keyspace, f"{run}-{name}", contender)
                    exact = check(STRUCTURED.get(name, name), session, keyspace, factory, seqs)
                finally:
                    fixtures.drop_keyspace(session, keyspace)
                drained = figures.drain(name, events, exact=exact)
                say(f"run {index + 1}: {json.dumps(drained.to_json())}")
                found.append(drained)
    finally:
        topics.delete_all()
    return found


def sink_tables(session: Session, keyspace: str) -> None:
    """The contenders' sink tables in ``keyspace``."""
    session.execute(KPI_TABLE.format(ks=keyspace), timeout=120)
    session.execute(VISITORS_TABLE.format(ks=keyspace), timeout=120)


def live_run(layout: Layout, args: argparse.Namespace, index: int) -> list[figures.Steady]:
    """Each Sluice contender fed ``args.rate`` events/s (``bench.state_steady``)."""
    found = []
    for name, contender in contenders().items():
        fed = state_steady.live(layout, args, name, contender, driver_spec, sink_tables, index)
        say(f"live run {index + 1}: {json.dumps(fed.to_json())}")
        found.append(fed)
    return found


def drive(
    layout: Layout,
    args: argparse.Namespace,
    topic: str,
    keyspace: str,
    pipeline: str,
    contender: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """A driver drains ``topic`` with ``contender``'s transform; returns its log events."""
    spec = driver_spec(topic, keyspace, contender, per_partition=args.per_partition, trigger=0)
    child = start_driver(
        spec,
        pipeline,
        layout.stack / "bench-state" / pipeline,
        spark_artifact.job_image_env(layout),  # Spark's Kafka jars, as the image has them
    )
    lines, events = JsonLines(child.log), []
    ends = end_offsets(topic)
    deadline = time.monotonic() + DRAIN_TIMEOUT
    try:
        while True:
            events += lines.read_new()
            if _positions(events) == ends:
                break
            if child.exited() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the driver did not drain {topic}:\n{child.tail()}")
            time.sleep(0.5)  # polling the driver's log, not waiting for an outcome
        if child.stop(120) != 0:
            raise RuntimeError(f"the driver did not stop cleanly:\n{child.tail()}")
    finally:
        child.kill()
    return events + lines.read_new()


def driver_spec(
    topic: str,
    keyspace: str,
    contender: Mapping[str, Any],
    *,
    per_partition: int,
    trigger: float,
) -> dict[str, Any]:
    """The pipeline spec of a Sluice contender reading ``topic``, its sink and
    checkpoint in ``keyspace``."""
    return {
        "image": "bench/local",
        "source": {
            "kafka": {
                "bootstrapServers": fixtures.BOOTSTRAP,
                "topics": [topic],
                "maxRecordsPerPartition": per_partition,
            }
        },
        "transform": contender["transform"],
        "sink": {
            "cassandra": {
                "contactPoints": [fixtures.CONTACT],
                "keyspace": keyspace,
                "table": contender.get("table", "page_kpis"),
            }
        },
        "checkpoint": {"cassandra": {"contactPoints": [fixtures.CONTACT], "keyspace": keyspace}},
        "trigger": {"intervalSeconds": trigger},
        "spark": {"driver": {"cores": 2, "memory": "2g"}},
    }


def structured(
    layout: Layout, args: argparse.Namespace, topic: str, keyspace: str, mode: str
) -> list[dict[str, Any]]:
    """Structured Streaming drains ``topic`` (``bench.structured_state``); returns its
    micro-batches as the driver's ``batch`` events."""
    workdir = layout.stack / "bench-state" / f"{keyspace}-ss"
    argv = [
        sys.executable,
        "-m",
        "bench.structured_state",
        f"--mode={mode}",
        f"--bootstrap={fixtures.BOOTSTRAP}",
        f"--topic={topic}",
        f"--contact={fixtures.CONTACT}",
        f"--keyspace={keyspace}",
        f"--per-trigger={args.per_partition * PARTITIONS}",
        f"--checkpoint={workdir / 'checkpoint'}",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        **spark_artifact.job_image_env(layout),
    }
    child = Child.start("structured", argv, env, workdir / "structured.log", workdir)
    try:
        code = child.proc.wait(DRAIN_TIMEOUT)
        if code != 0:
            raise RuntimeError(f"Structured Streaming did not drain {topic}:\n{child.tail()}")
    finally:
        child.kill()
    return JsonLines(child.log).read_new()


def _positions(events: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Where the committed batches of the log events end, per partition."""
    ends: dict[int, int] = {}
    for batch in events:
        if batch.get("event") != "batch":
            continue
        for spans in batch.get("ranges", {}).values():
            for partition, span in spans.items():
                ends[int(partition)] = max(ends.get(int(partition), 0), int(span[1]))
    return ends


def end_offsets(topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": fixtures.BOOTSTRAP, "group.id": "bench-state"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def check(
    name: str, session: Session, keyspace: str, factory: EventFactory, seqs: Sequence[int]
) -> bool:
    """Whether the contender's output is what its records make."""
    if name == "visitors":
        found, want = _visitors(session, keyspace), _distinct_users(factory, set(seqs))
        off = [abs(found.get(k, 0) - n) / n for k, n in want.items() if found.get(k) != n]
        if off or set(found) != set(want):
            say(
                f"{keyspace}: {len(off)} of {len(want)} windows' visitors off (at most "
                f"{max(off, default=0):.1%}), {len(set(found) - set(want))} extra windows"
            )
        return found == want
    counted = seqs if name == "kpi" else sorted(set(seqs))
    return _sums(session, keyspace) == _expected_sums(factory, counted)


def _window(ts_ms: int) -> int:
    return ts_ms // 1000 // WINDOW_S * WINDOW_S


def _expected_sums(factory: EventFactory, seqs: Sequence[int]) -> Counter[tuple[str, int]]:
    sums: Counter[tuple[str, int]] = Counter()
    for seq in seqs:
        event = factory.event(seq)
        sums[(normalised_page(str(event["page"])), _window(int(str(event["ts"]))))] += 1
    return sums


def _sums(session: Session, keyspace: str) -> Counter[tuple[str, int]]:
    sums: Counter[tuple[str, int]] = Counter()
    for row in session.execute(f"SELECT page, window_start, events FROM {keyspace}.page_kpis"):
        at = int(row.window_start.replace(tzinfo=UTC).timestamp())
        sums[(row.page, at)] += row.events
    return sums


def _distinct_users(factory: EventFactory, seqs: set[int]) -> dict[tuple[str, int], int]:
    """Distinct users per page and window, but the far-future event's (still open)."""
    users: dict[tuple[str, int], set[str]] = defaultdict(set)
    for seq in seqs - {FLUSH_SEQ}:
        event = factory.event(seq)
        key = (normalised_page(str(event["page"])), _window(int(str(event["ts"]))))
        users[key].add(str(event["user_id"]))
    return {k: len(v) for k, v in users.items()}


def _visitors(session: Session, keyspace: str) -> dict[tuple[str, int], int]:
    found = {}
    for row in session.execute(
        f"SELECT page, window_start, visitors FROM {keyspace}.page_visitors"
    ):
        found[(row.page, int(row.window_start.replace(tzinfo=UTC).timestamp()))] = row.visitors
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    layout = Layout.from_env()
    fixtures.ensure_stack(layout, say)
    runs = [] if args.live_only else [one_run(layout, args, i) for i in range(args.runs)]
    lives = [] if args.skip_live else [live_run(layout, args, i) for i in range(args.runs)]
    rows, live_rows = figures.summary(runs), figures.steady_summary(lives)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    records = int(args.events * (1 + args.resent)) + 1
    text = figures.markdown(rows, records, args.per_partition * PARTITIONS, live_rows)
    doc = {
        "stamp": f"{stamp}-state",
        "settings": {**vars(args), "results": str(args.results)},
        "load_average_at_end": os.getloadavg(),
        "summary": rows,
        "live_summary": live_rows,
        "runs": [[d.to_json() for d in run] for run in runs],
        "live_runs": [[f.to_json() for f in run] for run in lives],
    }
    data, table = write(doc, text, args.results)
    say(f"results: {data}, {table}")
    print()
    print(text)
    exact = all(r["exact_runs"] == r["runs"] for r in rows if r["contender"] not in APPROXIMATE)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
