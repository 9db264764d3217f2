"""``python -m bench.pubsub`` (``make bench-pubsub``; ``make bench`` runs it too): the
Pub/Sub source's pull -> acknowledge throughput on the stack's Pub/Sub server, and
what its deduplication costs per batch.

Each run: a fresh project with a topic, a subscription for the driver and one for the
bare client, ``--messages`` sample events published to both; the bare client pulls
and acknowledges its copy in a loop (the server's ceiling); then the real driver
(``python -m sluice_job``, the KPI example into Cassandra, batches of up to
``--per-batch``) drains its copy, and the run ends when the server counts every
message acknowledged. The KPI sums are checked against the events. Figures come
from the driver's ``batch`` and ``pubsub batch`` log events (:mod:`bench.pubsub_figures`);
``--runs`` (3) runs, medians to ``bench/results/<stamp>-pubsub.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from cassandra.cluster import Session

from bench import fixtures
from bench import pubsub_figures as figures
from bench.files import write
from bench.processes import JsonLines, start_driver
from bench.settings import RESULTS
from sluice_dev.events import EventFactory, normalised_page
from sluice_dev.paths import Layout
from sluice_dev.pubsub import publish, remote
from sluice_dev.servers import pubsub as pubsub_server

SERVERS: Final = ("cassandra", pubsub_server.NAME)
KPI_TABLE: Final = """CREATE TABLE {ks}.page_kpis (page text, window_start timestamp,
    batch_id bigint, views bigint, clicks bigint, events bigint,
    PRIMARY KEY ((page, window_start), batch_id))"""
DRAIN_TIMEOUT: Final = 900.0


def say(line: str) -> None:
    print(f"bench-pubsub: {line}", flush=True)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pubsub", description=__doc__)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--per-batch", type=int, default=3_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def client_ceiling(project: str, subscription: str, count: int) -> float:
    """Messages/s of a bare pull -> acknowledge loop over ``count`` messages."""
    client = publish.subscriber_client(pubsub_server.HOST)
    path = publish.subscription_path(project, subscription)
    done, began = 0, time.monotonic()
    try:
        while done < count:
            response = client.pull(subscription=path, max_messages=1_000, timeout=30)
            ack_ids = [r.ack_id for r in response.received_messages]
            if ack_ids:
                client.acknowledge(subscription=path, ack_ids=ack_ids)
            done += len(ack_ids)
    finally:
        client.close()
    return done / (time.monotonic() - began)


def expected_sums(factory: EventFactory, count: int) -> Counter[tuple[str, str]]:
    """Events per (page, window minute): the KPI's ``events`` column, summed."""
    sums: Counter[tuple[str, str]] = Counter()
    for seq in range(count):
        if factory.is_bad(seq):
            continue
        event = factory.event(seq)
        minute = int(str(event["ts"])) // 60_000 * 60
        sums[(normalised_page(str(event["page"])), str(minute))] += 1
    return sums


def sink_sums(session: Session, keyspace: str) -> Counter[tuple[str, str]]:
    sums: Counter[tuple[str, str]] = Counter()
    for row in session.execute(f"SELECT page, window_start, events FROM {keyspace}.page_kpis"):
        sums[(row.page, str(int(row.window_start.replace(tzinfo=UTC).timestamp())))] += row.events
    return sums


def one_run(layout: Layout, args: argparse.Namespace, index: int) -> figures.RunFigures:
    run = f"b{uuid.uuid4().hex[:8]}"
    project, topic = f"bench-{run}", "events"
    factory = EventFactory(seed=40 + index)
    publish.ensure_topic(pubsub_server.HOST, project, topic)
    for sub in ("driver", "client"):
        publish.ensure_subscription(pubsub_server.HOST, project, topic, sub)
    say(f"run {index + 1}: publishing {args.messages:,} events to {project}")
    publish.publish(pubsub_server.HOST, project, topic, args.messages, factory=factory)
    client = client_ceiling(project, "client", args.messages)
    say(f"run {index + 1}: bare client {client:,.0f} msg/s")
    keyspace = f"bench_ps_{run}"
    with fixtures.cassandra_session(fixtures.CONTACT) as session:
        fixtures.create_keyspace(session, keyspace, [])
        session.execute(KPI_TABLE.format(ks=keyspace), timeout=120)
        try:
            events = drive(layout, args, project, keyspace, run)
            exact = sink_sums(session, keyspace) == expected_sums(factory, args.messages)
        finally:
            fixtures.drop_keyspace(session, keyspace)
            remote.forget(project)
    found = figures.run_figures(events, client, exact=exact)
    say(f"run {index + 1}: {json.dumps(found.to_json())}")
    return found


def drive(
    layout: Layout, args: argparse.Namespace, project: str, keyspace: str, run: str
) -> list[dict[str, Any]]:
    """The driver drains the subscription; returns its log events."""
    spec = {
        "image": "bench/local",
        "source": {
            "pubsub": {
                "project": project,
                "subscription": "driver",
                "endpoint": pubsub_server.HOST,
                "maxMessagesPerBatch": args.per_batch,
            }
        },
        "transform": {"entrypoint": "sluice_job.examples.kpi:transform"},
        "sink": {
            "cassandra": {
                "contactPoints": [fixtures.CONTACT],
                "keyspace": keyspace,
                "table": "page_kpis",
            }
        },
        "checkpoint": {"cassandra": {"contactPoints": [fixtures.CONTACT], "keyspace": keyspace}},
        "trigger": {"intervalSeconds": 0},
        "spark": {"driver": {"cores": 2, "memory": "1g"}},
    }
    child = start_driver(spec, run, layout.stack / "bench-pubsub" / run)
    lines, events = JsonLines(child.log), []
    deadline = time.monotonic() + DRAIN_TIMEOUT
    try:
        while True:
            events += lines.read_new()
            stats = remote.subscription_stats(project, "driver")
            if stats["acked"] >= args.messages and stats["unacked"] == 0:
                break
            if child.exited() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the driver did not drain the subscription:\n{child.tail()}")
            time.sleep(0.5)  # polling the server's counters, not waiting for an outcome
        if child.stop(120) != 0:
            raise RuntimeError(f"the driver did not stop cleanly:\n{child.tail()}")
    finally:
        child.kill()
    return events + lines.read_new()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    layout = Layout.from_env()
    fixtures.ensure_stack(layout, say, SERVERS)
    runs = [one_run(layout, args, index) for index in range(args.runs)]
    found = figures.summary(runs)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    text = figures.markdown(found, args.per_batch)
    doc = {
        "stamp": f"{stamp}-pubsub",
        "settings": {**vars(args), "results": str(args.results)},
        "load_average_at_end": os.getloadavg(),
        "summary": found,
        "runs": [r.to_json() for r in runs],
    }
    data, table = write(doc, text, args.results)
    say(f"results: {data}, {table}")
    print()
    print(text)
    return 0 if found["exact_runs"] == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
