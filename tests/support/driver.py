"""Running the real driver (``python -m sluice_job``) as a child process in tests.

Each run gets its own log and termination file; its JSON log lines are parsed so a
test can wait for a phase of a batch and kill the driver inside it. Resident
memory of the whole process tree (Python and the Spark JVM) is sampled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice_api import cluster
from sluice_dev.paths import REPO_ROOT
from tests.support import state
from tests.support.waiting import wait_for

Event = dict[str, Any]


@dataclass
class DriverRun:
    proc: subprocess.Popen[bytes]
    log: Path
    termination: Path
    peak_rss: int = 0
    _sampler: threading.Thread | None = None

    def events(self) -> list[Event]:
        result = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    result.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return result

    def batches(self) -> list[Event]:
        return [e for e in self.events() if e.get("event") == "batch"]

    def wait_event(self, match: Callable[[Event], bool], *, timeout: float, what: str) -> Event:
        def found() -> Event | None:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise AssertionError(f"driver exited {self.proc.returncode} before {what}:\n{tail}")
            return next((e for e in self.events() if match(e)), None)

        return wait_for(found, timeout=timeout, what=what)

    def wait_phase(self, phase: str, first_batch: int, *, timeout: float = 300) -> int:
        """Wait for the driver to announce ``phase`` (``failpoints``) of batch
        ``first_batch`` or a later one; returns that batch's id."""
        event = self.wait_event(
            lambda e: (
                e.get("event") == "phase" and e["phase"] == phase and e["batch_id"] >= first_batch
            ),
            timeout=timeout,
            what=f"phase {phase} of batch {first_batch} or later",
        )
        return int(event["batch_id"])

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        self.proc.send_signal(sig)

    def signal_tree(self, sig: signal.Signals) -> None:
        """Signal the driver and everything it started (the Spark JVM, Python workers)."""
        os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def message(self) -> dict[str, Any]:
        return dict(json.loads(self.termination.read_text()))

    def start_sampling(self) -> None:
        def sample() -> None:
            while self.proc.poll() is None:
                self.peak_rss = max(self.peak_rss, tree_rss(self.proc.pid))
                threading.Event().wait(0.5)

        self._sampler = threading.Thread(target=sample, daemon=True)
        self._sampler.start()


@dataclass
class Driver:
    """Starts driver processes of one pipeline; numbered runs keep their own logs."""

    workdir: Path
    pipeline: str
    namespace: str = "tests"
    cluster: str = "test-cluster"
    """``SLUICE_CLUSTER_ID``: the operator's cluster id, part of the checkpoint key."""
    image_env: Mapping[str, str] = field(default_factory=dict)
    """The job image's Spark environment (the ``job_image_env`` fixture): the Kafka
    jars and the class archive, as the image's ``ENV`` gives them to a pod."""
    runs: list[DriverRun] = field(default_factory=list)

    def start(
        self,
        spec: Mapping[str, Any],
        epoch: int,
        *,
        failpoints: str = "",
        env: Mapping[str, str] | None = None,
    ) -> DriverRun:
        n = len(self.runs) + 1
        log = self.workdir / f"driver-{n}.log"
        termination = self.workdir / f"termination-{n}.json"
        child_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
            "SLUICE_CONFIG": json.dumps(spec),
            "SLUICE_PIPELINE": self.pipeline,
            "SLUICE_NAMESPACE": self.namespace,
            "SLUICE_CLUSTER_ID": self.cluster,
            "SLUICE_EPOCH": str(epoch),
            "SLUICE_TERMINATION_LOG": str(termination),
            **self.image_env,
            "SLUICE_FAILPOINTS": failpoints,
            **(env or {}),
        }
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sluice_job"],
                env=child_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )
        run = DriverRun(proc, log, termination)
        run.start_sampling()
        self.runs.append(run)
        return run

    @property
    def checkpoint_key(self) -> str:
        """The key of the pipeline's rows in the checkpoint tables."""
        return cluster.checkpoint_key(self.cluster, self.namespace, self.pipeline)

    @property
    def pipeline_id(self) -> str:
        """``namespace/name``: the ``pipeline`` label of its metrics."""
        return f"{self.namespace}/{self.pipeline}"

    def stop_all(self) -> None:
        for run in self.runs:
            if run.proc.poll() is None:
                run.signal_tree(signal.SIGCONT)
                run.signal_tree(signal.SIGKILL)
                run.wait(30)


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it. Children are read from every thread of a
    process: Linux lists a child under the thread that forked it, and the driver
    launches Spark's JVM from a thread of its own (``sluice_job.spark.Launch``)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in children.read_text().split())
            except OSError:
                continue
    return found


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    total = 0
    for process in descendants(pid):
        try:
            status = Path(f"/proc/{process}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def spec(
    *,
    bootstrap: str,
    topic: str,
    contact: str,
    keyspace: str,
    table: str = "events",
    entrypoint: str = "tests.support.transforms:tagged",
    options: Mapping[str, Any] | None = None,
    cap: int = 10_000,
    interval: float = 0.2,
    **extra: Any,
) -> dict[str, Any]:
    """A pipeline spec for the local stack (camelCase, as users write it)."""
    return {
        "image": "local/test",
        "source": {
            "kafka": {
                "bootstrapServers": bootstrap,
                "topics": [topic],
                "maxRecordsPerPartition": cap,
            }
        },
        "transform": {"entrypoint": entrypoint, "options": dict(options or {"tag": "v1"})},
        "sink": {"cassandra": {"contactPoints": [contact], "keyspace": keyspace, "table": table}},
        "checkpoint": {"cassandra": {"contactPoints": [contact], "keyspace": keyspace}},
        "trigger": {"intervalSeconds": interval},
        "spark": {"driver": {"cores": 2, "memory": "1g"}},
        **extra,
    }


def kill_then_fence(
    driver: Driver, body: Mapping[str, Any], session: Any, keyspace: str
) -> tuple[DriverRun, DriverRun, int]:
    """The faults of the stateful examples' tests, on pipeline ``body``, epochs 1 to 3:
    epoch 1 SIGKILLed after its writes of batch 2 or later, before its commit; epoch 2
    frozen (SIGSTOP, its node partitioned away) as it reads its next batch, while
    epoch 3 takes over and commits past that batch; then epoch 2 resumed. Returns
    epoch 2 (resumed, left to exit), epoch 3 (running) and the batch epoch 2 froze in."""

    def committed() -> int:
        row = state.checkpoint_row(session, keyspace, driver.checkpoint_key)
        return int(row.batch_id) if row else 0

    killed = driver.start(body, 1, failpoints="after_write=2")
    killed.wait_phase("after_write", 2)
    killed.kill(signal.SIGKILL)
    assert killed.wait(60) == -signal.SIGKILL
    zombie = driver.start(body, 2, failpoints="read=2")
    frozen = zombie.wait_phase("read", committed() + 1)
    zombie.signal_tree(signal.SIGSTOP)
    successor = driver.start(body, 3)
    wait_for(lambda: committed() >= frozen + 1, timeout=300, what="epoch 3 past the frozen batch")
    zombie.signal_tree(signal.SIGCONT)
    return zombie, successor, frozen


def drain_and_stop(
    run: DriverRun,
    session: Any,
    keyspace: str,
    pipeline_id: str,
    ends: Mapping[int, int],
    *,
    timeout: float = 300,
    what: str = "the driver to commit the topic's end offsets",
) -> None:
    """Wait until the checkpoint holds ``ends``, then stop the driver cleanly (exit 0)."""
    wait_for(
        lambda: state.committed(session, keyspace, pipeline_id) == ends, timeout=timeout, what=what
    )
    run.kill(signal.SIGTERM)
    assert run.wait(120) == 0


def kill_zombie_then_upgrade(
    driver: Driver,
    v1: Mapping[str, Any],
    v2_transform: Mapping[str, Any],
    session: Any,
    keyspace: str,
    topic: tuple[str, str, int],
    second_half: Callable[[], None],
) -> None:
    """The stateful examples' run: ``v1`` through :func:`kill_then_fence` (the resumed
    zombie must exit 3, fenced) until it has drained ``topic`` (bootstrap, name,
    partitions) and stopped cleanly; then ``second_half()`` produces more, and v1 with
    ``v2_transform``'s changes (entrypoint, state) drains it, started as epoch 4."""
    bootstrap, name, partitions = topic
    key = driver.checkpoint_key
    zombie, successor, _ = kill_then_fence(driver, v1, session, keyspace)
    # fenced: at its commit, or before, by the state its successor moved on
    assert zombie.wait(300) == 3
    assert zombie.message()["reason"] == "Fenced"
    ends = state.end_offsets(bootstrap, name, partitions)
    drain_and_stop(successor, session, keyspace, key, ends, timeout=600)
    second_half()
    v2 = {**v1, "transform": {**v1["transform"], **v2_transform}}
    upgraded = driver.start(v2, 4)
    ends = state.end_offsets(bootstrap, name, partitions)
    drain_and_stop(upgraded, session, keyspace, key, ends, timeout=600)
