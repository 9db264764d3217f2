"""``python -m bench.handover``: the handover gap of an upgrade, warm handover beside a
clean stop, measured in the same run on the local control plane (issue 20).

One pipeline of the events example under the stack's operator, events produced at a
steady ``--rate`` all along, and ``--upgrades`` (5) image changes per mode
``v1 -> v2 -> v1 ...``, the modes taking turns (``CleanStop``, ``WarmHandover``,
``CleanStop``, ...: the manifest of each change sets ``upgrade.mode``), so both see
the same machine: on a shared machine whose load moves, two modes measured one after
the other would compare two loads. The two images are the same code under two names,
so the figure is the mechanism's, not a code change's. After each change the bench
waits until the new epoch has committed and the pipeline runs again, then a few
seconds of steady state before the next.

The gap of one upgrade is read from the batch history: from the old epoch's last
commit to the new epoch's first (``committed_at``), what the driver of a warm
handover also reports as ``sluice_handover_gap_seconds``. Also reported: from the
``kubectl apply`` to that first commit. The medians per mode go to
``bench/results/<stamp>-handover.json`` and ``.md`` (also printed). The figures are
measurements, not assertions: only meaningful on an otherwise idle machine. Exit 1
when a mode did not finish its upgrades or its sink was not exact.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from cassandra import InvalidRequest
from cassandra.cluster import Session

from bench import fixtures, options
from bench.executor_figures import TRANSFORM
from bench.files import write
from bench.fixtures import BOOTSTRAP, CONTACT, Names, Topics
from bench.settings import RESULTS
from sluice_dev import localcluster, ports
from sluice_dev.events import EventFactory
from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.produce import Background
from sluice_operator import naming

NAMESPACE: Final = "sluice-bench-handover"
IMAGE: Final = "sluice-bench/job"
OPERATOR: Final = "bench-handover-operator"
OPERATOR_PORT: Final = 18093 + ports.OFFSET
"""Beside the demo's (18090) and the executor bench's (18092) operators."""
SERVERS: Final = fixtures.OPERATOR_SERVERS
MODES: Final = ("CleanStop", "WarmHandover")
PIPELINE: Final = "handover"
TABLE: Final = "events"

Say = Callable[[str], None]


def say(line: str) -> None:
    print(f"[bench-handover {datetime.now():%H:%M:%S}] {line}", flush=True)


@dataclass(frozen=True)
class Settings:
    upgrades: int = 5
    rate: float = 200.0
    partitions: int = 4
    settle_seconds: float = 5.0
    """Steady state between upgrades (a few batches of the new driver)."""
    timeout: float = 300.0
    results: Path = RESULTS


@dataclass(frozen=True)
class Upgrade:
    mode: str
    epoch: int
    """The new driver's epoch."""
    gap_seconds: float
    """The old epoch's last commit -> the new epoch's first (the batch history)."""
    apply_to_commit_seconds: float
    """``kubectl apply`` -> the new epoch's first commit."""


@dataclass
class ModeResult:
    mode: str
    upgrades: list[Upgrade] = field(default_factory=list)
    events: int = 0
    rows: int = 0

    @property
    def exact(self) -> bool:
        return self.rows == self.events

    def median(self, name: str) -> float | None:
        values = [getattr(u, name) for u in self.upgrades]
        return statistics.median(values) if values else None


def manifest(pipeline: str, mode: str, image: str, topic: str, keyspace: str) -> dict[str, Any]:
    cassandra = {"contactPoints": [CONTACT], "keyspace": keyspace}
    return {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": naming.KIND,
        "metadata": {"name": pipeline, "namespace": NAMESPACE},
        "spec": {
            "image": image,
            "source": {
                "kafka": {
                    "bootstrapServers": BOOTSTRAP,
                    "topics": [topic],
                    "startingOffsets": "earliest",
                    "maxRecordsPerPartition": 2_000,
                }
            },
            "transform": {"entrypoint": TRANSFORM},
            "sink": {"cassandra": {**cassandra, "table": TABLE}},
            "checkpoint": {"cassandra": cassandra},
            "trigger": {"intervalSeconds": 1},
            "spark": {"driver": {"cores": 1, "memory": "768m"}},
            "upgrade": {"mode": mode, "stopTimeoutSeconds": 60},
            "restart": {"backoffSeconds": 1, "maxBackoffSeconds": 8, "maxFailures": 3},
        },
    }


def commits(session: Session, keyspace: str) -> list[tuple[int, int, datetime]]:
    """``(batch_id, epoch, committed_at)`` of every committed batch, oldest first (the
    keyspace is the run's own: one pipeline's history)."""
    try:
        rows = session.execute(f"SELECT batch_id, epoch, committed_at FROM {keyspace}.batches")
    except InvalidRequest:  # the driver has not made its tables yet
        return []
    return sorted((int(r.batch_id), int(r.epoch), r.committed_at) for r in rows)


def wait(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


class Cluster:
    """The pipelines of one namespace, through kubectl."""

    def __init__(self, layout: Layout, namespace: str = NAMESPACE) -> None:
        self.kubectl = Kubectl(layout)
        self.namespace = namespace

    def status(self, pipeline: str) -> dict[str, Any]:
        found = self.kubectl(
            "get", "sp", pipeline, "-n", self.namespace, "-o", "json", "--ignore-not-found"
        )
        return (json.loads(found).get("status") or {}) if found.strip() else {}

    def delete(self, pipeline: str) -> None:
        self.kubectl(
            "delete", "sp", pipeline, "-n", self.namespace, "--ignore-not-found", "--timeout=300s"
        )


def run(cluster: Cluster, session: Session, s: Settings) -> list[ModeResult]:
    names = Names.fresh()
    keyspace, topic = names.keyspace, Topics(BOOTSTRAP).create(names.topic("run"), s.partitions)
    fixtures.create_keyspace(session, keyspace, [TABLE])
    results = {mode: ModeResult(mode) for mode in MODES}
    production = Background(BOOTSTRAP, topic, 10**9, s.rate, EventFactory(31)).start()
    try:
        cluster.kubectl.apply(manifest(PIPELINE, MODES[0], f"{IMAGE}:v1", topic, keyspace))
        wait(
            lambda: any(epoch == 1 for _, epoch, _ in commits(session, keyspace)),
            s.timeout,
            f"{PIPELINE}: a first commit",
        )
        say(f"{PIPELINE} runs (epoch 1)")
        for index in range(s.upgrades * len(MODES)):
            mode = MODES[index % len(MODES)]
            time.sleep(s.settle_seconds)
            upgrade = one_upgrade(cluster, session, keyspace, topic, mode, index, s)
            results[mode].upgrades.append(upgrade)
            say(
                f"upgrade {index + 1} ({mode}, epoch {upgrade.epoch}): gap "
                f"{upgrade.gap_seconds:.2f}s, apply -> first commit "
                f"{upgrade.apply_to_commit_seconds:.2f}s"
            )
    finally:
        production.stop()
    events = production.wait(60)
    wait(
        lambda: fixtures.count_rows(session, keyspace, TABLE) >= events,
        s.timeout,
        f"{PIPELINE}: every produced event in the sink",
    )
    rows = fixtures.count_rows(session, keyspace, TABLE)
    cluster.delete(PIPELINE)
    fixtures.drop_keyspace(session, keyspace)
    for result in results.values():
        result.events, result.rows = events, rows
    return list(results.values())


def one_upgrade(
    cluster: Cluster,
    session: Session,
    keyspace: str,
    topic: str,
    mode: str,
    index: int,
    s: Settings,
) -> Upgrade:
    """Apply the other image with ``mode``; the gap from the batch history."""
    epoch = int(cluster.status(PIPELINE)["epoch"])
    image = f"{IMAGE}:{'v2' if index % 2 == 0 else 'v1'}"
    applied = time.time()
    cluster.kubectl.apply(manifest(PIPELINE, mode, image, topic, keyspace))
    new = wait(
        lambda: (
            (status := cluster.status(PIPELINE)).get("phase") == "Running"
            and status.get("image") == image
            and int(status["epoch"])
        ),
        s.timeout,
        f"{PIPELINE}: {image} running",
    )
    history = wait(
        lambda: (h := commits(session, keyspace)) and any(e == new for _, e, _ in h) and h,
        s.timeout,
        f"{PIPELINE}: a commit by epoch {new}",
    )
    last_old = max(at for _, e, at in history if e == epoch)
    first_new = min(at for _, e, at in history if e == new)
    return Upgrade(
        mode,
        new,
        (first_new - last_old).total_seconds(),
        first_new.replace(tzinfo=UTC).timestamp() - applied,
    )


def with_checkout(layout: Layout, reference: str) -> None:
    """This checkout's driver in the image's code root, as a job image built from it
    would hold it: the node agent passes no ``PYTHONPATH`` to pods, so without it a
    pod runs whatever the virtualenv has installed."""
    image, version = reference.rsplit(":", 1)
    root = layout.stack / "images" / image.replace("/", "_") / version
    for package in (REPO_ROOT / "job" / "sluice_job", REPO_ROOT / "api" / "sluice_api"):
        target = root / package.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))


def report(results: Sequence[ModeResult], load: float) -> str:
    lines = [
        f"# Upgrade handover gap, median of {max(len(r.upgrades) for r in results)}",
        "",
        "| mode | gap: last old commit -> first new commit | apply -> first new commit "
        "| each gap (s) | sink exact |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        gap, whole = r.median("gap_seconds"), r.median("apply_to_commit_seconds")
        each = ", ".join(f"{u.gap_seconds:.2f}" for u in r.upgrades)
        lines.append(
            f"| {r.mode} | {gap or 0:.2f} s | {whole or 0:.2f} s | {each} | "
            f"{'yes' if r.exact else f'no ({r.rows} rows for {r.events} events)'} |"
        )
    lines += ["", f"Load average (1 min) at the end: {load:.1f}.", ""]
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> Settings:
    return options.parse(Settings, "python -m bench.handover", __doc__, argv)


def main(argv: Sequence[str] | None = None) -> int:
    s = parse(argv)
    layout = Layout.from_env()
    say(f"settings: {s}")
    fixtures.ensure_stack(layout, say, SERVERS)
    cluster = Cluster(layout)
    localcluster.operator_for(
        layout, cluster.kubectl, namespace=NAMESPACE, name=OPERATOR, port=OPERATOR_PORT, say=say
    )
    for reference in localcluster.register_job_images(layout, IMAGE, ("v1", "v2")):
        with_checkout(layout, reference)
    with fixtures.cassandra_session(CONTACT) as session:
        cluster.delete(PIPELINE)  # left by an interrupted run
        results = run(cluster, session, s)
    load = os.getloadavg()[0]
    text = report(results, load)
    stamp = f"{Names.fresh().stamp}-handover"
    doc = {
        "stamp": stamp,
        "settings": {k: str(v) for k, v in asdict(s).items()},
        "load_average": load,
        "modes": [
            {
                "mode": r.mode,
                "upgrades": [asdict(u) for u in r.upgrades],
                "median_gap_seconds": r.median("gap_seconds"),
                "median_apply_to_commit_seconds": r.median("apply_to_commit_seconds"),
                "events": r.events,
                "rows": r.rows,
            }
            for r in results
        ],
    }
    data, table = write(doc, text, s.results)
    print(text)
    say(f"wrote {data} and {table}")
    complete = all(len(r.upgrades) == s.upgrades and r.exact for r in results)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
