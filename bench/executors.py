"""``python -m bench.executors``: Sluice on Spark's Kubernetes backend, two executor
pods beside local mode, on the local control plane (``make bench`` runs it after the
main benchmark; ``make bench-executors`` alone).

Each run, for each mode of :mod:`bench.executor_figures` in turn (never both at
once): a fresh topic with a backlog of ``--events``; ``kubectl apply`` of the mode's
StreamingPipeline (the operator of the stack starts its driver pod; in the executors
mode the driver asks the API server for its executor pods and the scheduler places
them on the stack's two nodes); the backlog drained; then ``--rate`` events/s for
``--paced-seconds`` (small batches, trigger 1 s); then every event looked up in the
sink and the pipeline deleted (its pods go with it). The driver's ``batch`` log
events are read from its pod's log file on the node agent.

Same machine, same two task slots: the figures are correctness and overhead (the
median paced batch of executors minus local mode's, in the same run), not a speed-up.
``--runs`` (3) whole runs; the summary holds the median of each figure and goes to
``bench/results/<stamp>-executors.json`` and ``.md`` (also printed). Exit code 1 when
a run was not exact or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from cassandra.cluster import Session

from bench import executor_figures as figures
from bench import fixtures
from bench.executor_figures import Batch, Comparison, Mode, ModeResult, Where
from bench.files import write
from bench.fixtures import BOOTSTRAP, CONTACT, Names, Topics
from bench.processes import JsonLines
from bench.settings import RESULTS
from sluice_dev import localcluster, ports
from sluice_dev.events import EventFactory
from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.servers import nodeagent
from sluice_operator import naming
from sluice_operator.builders import DRIVER_CLUSTER_ROLE

NAMESPACE: Final = "sluice-bench"
IMAGE: Final = "sluice-bench/job"
OPERATOR: Final = "bench-operator"
OPERATOR_PORT: Final = 18092 + ports.OFFSET
"""Beside the demo's operator (18090): both may run on one stack."""
SERVERS: Final = fixtures.OPERATOR_SERVERS
SEEDS: Final = {"local": 21, "executors": 22}
START_TIMEOUT: Final = 300.0

Say = Callable[[str], None]


@dataclass(frozen=True)
class Settings:
    events: int = 100_000
    partitions: int = 4
    cap: int = 2_500
    """Records per partition per batch (``maxRecordsPerPartition``)."""
    rate: float = 500.0
    paced_seconds: float = 45.0
    executors: int = 2
    runs: int = 3
    timeout: float = 900.0
    """Seconds a mode may take to drain what was produced."""
    keep: bool = False
    results: Path = RESULTS


SMOKE: Final[dict[str, Any]] = {"events": 20_000, "cap": 1_000, "paced_seconds": 15.0, "runs": 1}


def say(line: str) -> None:
    print(f"[bench-executors {datetime.now():%H:%M:%S}] {line}", flush=True)


@dataclass
class Driver:
    """The mode's driver pod's log, read as it grows."""

    reports: JsonLines
    batches: list[Batch]

    def poll(self) -> None:
        for event in self.reports.read_new():
            if event.get("level") == "error":  # BatchFailed, Fenced, ...: not a clean run
                raise RuntimeError(f"the driver reported {event.get('event')}: {event}")
            batch = figures.batch_of(event)
            if batch is not None:
                self.batches.append(batch)

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches)

    def wait_records(self, count: int, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while self.records < count:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what}: {self.records:,} of {count:,} records after {timeout:.0f}s"
                )
            time.sleep(0.5)
            self.poll()


class Cluster:
    """The stack's control plane as the bench uses it: pipelines in ``NAMESPACE``."""

    def __init__(self, layout: Layout) -> None:
        self.layout, self.kubectl = layout, Kubectl(layout)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        found = self.kubectl("get", kind, "-n", NAMESPACE, "-o", "json", "--ignore-not-found", name)
        return json.loads(found) if found.strip() else None

    def driver_log(self, pipeline: str, timeout: float) -> Path:
        """The running driver pod's log file on the node agent."""
        deadline = time.monotonic() + timeout
        while True:
            status = (self.get("streamingpipeline", pipeline) or {}).get("status") or {}
            pod = self.get("pod", status["driverPod"]) if status.get("driverPod") else None
            if pod and (pod.get("status") or {}).get("phase") == "Running":
                meta = pod["metadata"]
                folder = f"{NAMESPACE}_{meta['name']}_{meta['uid']}"
                log = nodeagent.state_dir(self.layout) / "pods" / folder / "driver" / "0.log"
                if log.exists():
                    return log
            if time.monotonic() > deadline:
                raise RuntimeError(f"{pipeline}: no running driver pod after {timeout:.0f}s")
            time.sleep(0.5)

    def executor_nodes(self, pipeline: str) -> list[str]:
        selector = f"{naming.LABEL_PIPELINE}={pipeline},{naming.LABEL_ROLE}={naming.ROLE_EXECUTOR}"
        found = json.loads(
            self.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "json")
        )
        return [
            str(p["spec"].get("nodeName"))
            for p in found["items"]
            if (p.get("status") or {}).get("phase") == "Running"
        ]

    def delete(self, pipeline: str) -> None:
        """The pipeline deleted (its driver stops cleanly) and every pod of it gone."""
        self.kubectl(
            "delete",
            "streamingpipeline",
            pipeline,
            "-n",
            NAMESPACE,
            "--ignore-not-found",
            "--timeout=300s",
        )
        deadline = time.monotonic() + 180
        selector = f"{naming.LABEL_PIPELINE}={pipeline}"
        while self.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "name").strip():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{pipeline}: pods left 180s after its deletion")
            time.sleep(0.5)


def prepare(layout: Layout) -> Cluster:
    """Kafka, Cassandra, the control plane and the node agent up (started if down,
    left running); the CRD, the namespace, an operator serving it, the job image and
    what the chart ships for drivers with executors (ClusterRole, admission policy)."""
    fixtures.ensure_stack(layout, say, SERVERS)
    cluster = Cluster(layout)
    localcluster.operator_for(
        layout, cluster.kubectl, namespace=NAMESPACE, name=OPERATOR, port=OPERATOR_PORT, say=say
    )
    localcluster.register_job_images(layout, IMAGE, ("v1",))
    localcluster.apply_driver_rights(layout, cluster.kubectl, DRIVER_CLUSTER_ROLE)
    for mode in (figures.LOCAL, figures.executors_mode(1)):
        cluster.delete(mode.pipeline)  # left by an interrupted run
    return cluster


def run_mode(
    cluster: Cluster, session: Session, topics: Topics, names: Names, mode: Mode, s: Settings
) -> ModeResult:
    factory = EventFactory(SEEDS[mode.name])
    topic = topics.create(names.topic(mode.name), s.partitions)
    produce(BOOTSTRAP, topic, s.events, factory=factory)
    where = Where(NAMESPACE, f"{IMAGE}:v1", BOOTSTRAP, topic, CONTACT, names.keyspace, s.cap)
    applied_at = time.time()
    cluster.kubectl.apply(figures.manifest(mode, where))
    say(
        f"{mode.name}: applied {mode.pipeline} ({mode.executors} executors), "
        f"backlog {s.events:,} events"
    )
    driver = Driver(JsonLines(cluster.driver_log(mode.pipeline, START_TIMEOUT)), [])
    try:
        driver.wait_records(s.events, s.timeout, f"{mode.name}: the backlog")
        backlog = list(driver.batches)
        pods = cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide")
        nodes = cluster.executor_nodes(mode.pipeline)
        say(f"{mode.name}: backlog drained in {len(backlog)} batches; pods:\n{pods.rstrip()}")
        paced = int(s.rate * s.paced_seconds)
        with ThreadPoolExecutor(1) as pool:
            producing = pool.submit(
                produce, BOOTSTRAP, topic, paced, start=s.events, rate=s.rate, factory=factory
            )
            while not producing.done():
                driver.poll()
                time.sleep(0.5)
            producing.result()
        driver.wait_records(s.events + paced, s.timeout, f"{mode.name}: the paced events")
        rows = fixtures.count_rows(session, names.keyspace, mode.table)
    finally:
        cluster.delete(mode.pipeline)
    result = ModeResult(
        mode=mode.name,
        executors=mode.executors,
        applied_at=applied_at,
        backlog_events=s.events,
        paced_events=paced,
        backlog=backlog,
        paced=driver.batches[len(backlog) :],
        rows_in_sink=rows,
        executor_nodes=nodes,
        pods=pods,
    )
    found = figures.figures(result)
    say(
        f"{mode.name}: {rows:,} rows for {s.events + paced:,} events "
        f"({'exact' if found.exact else '; '.join(found.problems)}), "
        f"paced batch median {found.paced_batch_median}"
    )
    return result


def one_run(cluster: Cluster, s: Settings, index: int) -> tuple[Comparison, list[ModeResult]]:
    names = Names.fresh()
    say(f"run {index + 1} of {s.runs}: keyspace {names.keyspace}")
    topics = Topics(BOOTSTRAP)
    modes = (figures.LOCAL, figures.executors_mode(s.executors))
    with fixtures.cassandra_session(CONTACT) as session:
        fixtures.create_keyspace(session, names.keyspace, [m.table for m in modes])
        try:
            local, remote = (run_mode(cluster, session, topics, names, m, s) for m in modes)
        finally:
            if not s.keep:
                fixtures.drop_keyspace(session, names.keyspace)
                topics.delete_all()
    comparison = Comparison(figures.figures(local), figures.figures(remote))
    return comparison, [local, remote]


def parse(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(prog="python -m bench.executors", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help=f"quick defaults: {SMOKE}")
    base = Settings()
    for name in ("events", "partitions", "cap", "rate", "paced_seconds", "executors", "runs"):
        parser.add_argument("--" + name.replace("_", "-"), type=type(getattr(base, name)))
    parser.add_argument("--keep", action="store_true", help="keep topics and keyspace")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args(argv)
    smoke = args.smoke or os.environ.get("BENCH_SMOKE", "") not in ("", "0")
    settings = replace(base, **SMOKE) if smoke else base
    given = {
        k: v
        for k, v in vars(args).items()
        if v is not None and k not in ("smoke", "keep", "results")
    }
    settings = replace(settings, **given, keep=args.keep)
    return replace(settings, results=args.results) if args.results else settings


def main(argv: Sequence[str] | None = None) -> int:
    s = parse(argv)
    layout = Layout.from_env()
    say(f"settings: {s}")
    cluster = prepare(layout)
    runs: list[Comparison] = []
    details: list[dict[str, Any]] = []
    failed = False
    for index in range(s.runs):
        try:
            comparison, results = one_run(cluster, s, index)
        except RuntimeError as err:
            print(f"bench-executors: run {index + 1}: {err}", file=sys.stderr)
            failed = True
            break
        runs.append(comparison)
        details.append({**comparison.to_json(), "pods": {r.mode: r.pods for r in results}})
    if not runs:
        return 1
    found = figures.summary(runs)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    text = figures.markdown(found, s.executors)
    doc = {
        "stamp": f"{stamp}-executors",
        "settings": {**vars(s), "results": str(s.results)},
        "load_average_at_end": os.getloadavg(),
    }
    data, table = write({**doc, "summary": found, "runs": details}, text, s.results)
    say(f"results: {data}, {table}")
    print()
    print(text)
    exact = found["exact_runs"] == len(runs)
    return 0 if exact and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
