"""``python -m bench.failover``: a killed driver -> the next commit, with a hot standby
(``spec.standby: 1``) beside without one, measured in the same run on the local
control plane (issue 20), and what a standby costs.

One pipeline of the events example under the stack's operator, events produced at a
steady ``--rate`` all along, and ``--kills`` (5) SIGKILLs of the running driver per
mode, the modes taking turns (``NoStandby``, ``HotStandby``, ...: the manifest sets
``spec.standby``, which only the operator reads, so switching restarts nothing), so
both see the same machine. Before a ``HotStandby`` kill the bench waits until the
standby is Ready; before a ``NoStandby`` kill, until no standby pod is left; before
either, until the driver has committed. Then a few seconds of steady state, the
driver's process is killed, and the bench waits for the first commit of a newer epoch.

Per kill, from the batch history: the kill -> the newer epoch's first commit
(``committed_at``), and the killed epoch's last commit -> that first commit. Before
each ``HotStandby`` kill, the resident memory of the driver's and of the standby's
process trees (the driver process, its JVM and Python workers) and the CPU the standby
used while waiting (``--settle-seconds``). Medians go to
``bench/results/<stamp>-failover.json`` and ``.md`` (also printed). Measurements, not
assertions: only meaningful on an otherwise idle machine. Exit 1 when a mode did not
finish its kills or the sink was not exact.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from cassandra.cluster import Session

from bench import fixtures, handover, options
from bench.files import write
from bench.fixtures import BOOTSTRAP, CONTACT, Names, Topics
from bench.settings import RESULTS
from sluice_dev import localcluster, ports
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import Background

NAMESPACE: Final = "sluice-bench-failover"
OPERATOR: Final = "bench-failover-operator"
OPERATOR_PORT: Final = 18094 + ports.OFFSET
"""Beside the demo's (18090), the executor bench's (18092) and the handover bench's."""
MODES: Final = ("NoStandby", "HotStandby")
PIPELINE: Final = "failover"


def say(line: str) -> None:
    print(f"[bench-failover {datetime.now():%H:%M:%S}] {line}", flush=True)


@dataclass(frozen=True)
class Settings:
    kills: int = 5
    rate: float = 200.0
    partitions: int = 4
    settle_seconds: float = 30.0
    """Steady state before each kill; the standby's CPU is measured over it (at least
    one of its warm-ups, every 30 s, falls in it)."""
    timeout: float = 300.0
    results: Path = RESULTS


@dataclass(frozen=True)
class Kill:
    mode: str
    epoch: int
    """The killed driver's epoch."""
    kill_to_commit_seconds: float
    """SIGKILL -> the first commit of a newer epoch."""
    gap_seconds: float
    """The killed epoch's last commit -> that first commit."""
    driver_mb: float | None = None
    standby_mb: float | None = None
    standby_cpu_share: float | None = None
    """CPU seconds the waiting standby used per second of the settle window."""


@dataclass
class ModeResult:
    mode: str
    kills: list[Kill] = field(default_factory=list)

    def median(self, name: str) -> float | None:
        values = [v for k in self.kills if (v := getattr(k, name)) is not None]
        return statistics.median(values) if values else None


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def usage(pid: int) -> tuple[float, float]:
    """(resident MB, CPU seconds so far) of the process tree of ``pid``."""
    ticks, rss_kb, cpu = os.sysconf("SC_CLK_TCK"), 0, 0.0
    for member in tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        rss_kb += next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")), 0
        )
        cpu += (int(fields[11]) + int(fields[12])) / ticks
    return rss_kb / 1024, cpu


def pod_pid(cluster: handover.Cluster, pod: str) -> int:
    found = json.loads(cluster.kubectl("get", "pod", pod, "-n", NAMESPACE, "-o", "json"))
    return int(found["status"]["containerStatuses"][0]["containerID"].split("//")[1])


def manifest(mode: str, topic: str, keyspace: str) -> dict[str, Any]:
    body = handover.manifest(PIPELINE, "CleanStop", f"{handover.IMAGE}:v1", topic, keyspace)
    body["metadata"]["namespace"] = NAMESPACE
    body["spec"]["standby"] = 1 if mode == "HotStandby" else 0
    body["spec"]["failover"] = {"nodeLostSeconds": 5}
    return body


def one_kill(
    cluster: handover.Cluster, session: Session, keyspace: str, topic: str, mode: str, s: Settings
) -> Kill:
    cluster.kubectl.apply(manifest(mode, topic, keyspace))
    current = handover.wait(
        lambda: (st := cluster.status(PIPELINE)).get("phase") == "Running" and st,
        s.timeout,
        "Running",
    )
    epoch, driver = int(current["epoch"]), str(current["driverPod"])
    handover.wait(
        lambda: any(e == epoch for _, e, _ in handover.commits(session, keyspace)),
        s.timeout,
        f"a commit by epoch {epoch}",
    )
    if mode == "HotStandby":
        spare = handover.wait(
            lambda: (
                ((st := cluster.status(PIPELINE)).get("standby") or {}).get("state") == "Ready"
                and st["standby"]["pod"]
            ),
            s.timeout,
            "a Ready hot standby",
        )
    else:
        spare = None
        handover.wait(
            lambda: len(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "name").split()) == 1,
            s.timeout,
            "no standby pod left",
        )
    before = usage(pod_pid(cluster, spare))[1] if spare else 0.0
    time.sleep(s.settle_seconds)  # steady state; the standby's CPU meanwhile
    driver_mb = standby_mb = cpu_share = None
    if spare:
        standby_mb, after = usage(pod_pid(cluster, spare))
        cpu_share = (after - before) / s.settle_seconds
        driver_mb = usage(pod_pid(cluster, driver))[0]
    os.kill(pod_pid(cluster, driver), signal.SIGKILL)
    killed = datetime.now(UTC)
    history = handover.wait(
        lambda: (
            (h := handover.commits(session, keyspace)) and any(e > epoch for _, e, _ in h) and h
        ),
        s.timeout,
        f"a commit by an epoch above {epoch}",
    )
    first_new = min(at for _, e, at in history if e > epoch).replace(tzinfo=UTC)
    last_old = max(at for _, e, at in history if e == epoch).replace(tzinfo=UTC)
    return Kill(
        mode,
        epoch,
        (first_new - killed).total_seconds(),
        (first_new - last_old).total_seconds(),
        driver_mb,
        standby_mb,
        cpu_share,
    )


def run(cluster: handover.Cluster, session: Session, s: Settings) -> tuple[list[ModeResult], bool]:
    names = Names.fresh()
    keyspace, topic = names.keyspace, Topics(BOOTSTRAP).create(names.topic("run"), s.partitions)
    fixtures.create_keyspace(session, keyspace, [handover.TABLE])
    results = {mode: ModeResult(mode) for mode in MODES}
    production = Background(BOOTSTRAP, topic, 10**9, s.rate, EventFactory(41)).start()
    try:
        cluster.kubectl.apply(manifest(MODES[0], topic, keyspace))
        for index in range(s.kills * len(MODES)):
            mode = MODES[index % len(MODES)]
            kill = one_kill(cluster, session, keyspace, topic, mode, s)
            results[mode].kills.append(kill)
            say(
                f"kill {index + 1} ({mode}, epoch {kill.epoch}): kill -> next commit "
                f"{kill.kill_to_commit_seconds:.2f}s, last commit -> next "
                f"{kill.gap_seconds:.2f}s"
                + (
                    f", driver {kill.driver_mb:.0f} MB, standby {kill.standby_mb:.0f} MB, "
                    f"standby CPU {kill.standby_cpu_share:.3f} core"
                    if kill.standby_mb is not None
                    and kill.driver_mb is not None
                    and kill.standby_cpu_share is not None
                    else ""
                )
            )
    finally:
        production.stop()
    events = production.wait(60)
    handover.wait(
        lambda: fixtures.count_rows(session, keyspace, handover.TABLE) >= events,
        s.timeout,
        "every produced event in the sink",
    )
    exact = fixtures.count_rows(session, keyspace, handover.TABLE) == events
    cluster.delete(PIPELINE)
    fixtures.drop_keyspace(session, keyspace)
    return list(results.values()), exact


def report(results: Sequence[ModeResult], exact: bool, load: float) -> str:
    lines = [
        f"# A killed driver -> the next commit, median of {max(len(r.kills) for r in results)}",
        "",
        "| mode | SIGKILL -> next commit | last commit -> next commit | each (s) |",
        "|---|---|---|---|",
    ]
    for r in results:
        each = ", ".join(f"{k.kill_to_commit_seconds:.2f}" for k in r.kills)
        lines.append(
            f"| {r.mode} | {r.median('kill_to_commit_seconds') or 0:.2f} s | "
            f"{r.median('gap_seconds') or 0:.2f} s | {each} |"
        )
    hot = next(r for r in results if r.mode == "HotStandby")
    lines += [
        "",
        f"A ready hot standby (median): {hot.median('standby_mb') or 0:.0f} MB resident "
        f"(the driver beside it: {hot.median('driver_mb') or 0:.0f} MB), "
        f"{hot.median('standby_cpu_share') or 0:.3f} of a core while it waits.",
        f"Sink exact: {'yes' if exact else 'no'}. Load average (1 min) at the end: {load:.1f}.",
        "",
    ]
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> Settings:
    return options.parse(Settings, "python -m bench.failover", __doc__, argv)


def main(argv: Sequence[str] | None = None) -> int:
    s = parse(argv)
    layout = Layout.from_env()
    say(f"settings: {s}")
    fixtures.ensure_stack(layout, say, handover.SERVERS)
    cluster = handover.Cluster(layout, NAMESPACE)
    localcluster.operator_for(
        layout, cluster.kubectl, namespace=NAMESPACE, name=OPERATOR, port=OPERATOR_PORT, say=say
    )
    for reference in localcluster.register_job_images(layout, handover.IMAGE, ("v1",)):
        handover.with_checkout(layout, reference)
    with fixtures.cassandra_session(CONTACT) as session:
        cluster.delete(PIPELINE)  # left by an interrupted run
        results, exact = run(cluster, session, s)
    load = os.getloadavg()[0]
    text = report(results, exact, load)
    stamp = f"{Names.fresh().stamp}-failover"
    doc = {
        "stamp": stamp,
        "settings": {k: str(v) for k, v in asdict(s).items()},
        "load_average": load,
        "exact": exact,
        "modes": [
            {
                "mode": r.mode,
                "kills": [asdict(k) for k in r.kills],
                "median_kill_to_commit_seconds": r.median("kill_to_commit_seconds"),
                "median_gap_seconds": r.median("gap_seconds"),
                "median_standby_mb": r.median("standby_mb"),
                "median_driver_mb": r.median("driver_mb"),
                "median_standby_cpu_share": r.median("standby_cpu_share"),
            }
            for r in results
        ],
    }
    data, table = write(doc, text, s.results)
    print(text)
    say(f"wrote {data} and {table}")
    complete = all(len(r.kills) == s.kills for r in results)
    return 0 if complete and exact else 1


if __name__ == "__main__":
    sys.exit(main())
