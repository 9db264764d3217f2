"""The contenders as child processes: Sluice's real driver, the Structured Streaming
baseline and a Real-Time Mode query, started with the same pipeline spec and read
the same way.

All get one spec (camelCase, as users write it): same topic, transform, sink table
shape, per-partition cap, trigger interval and Spark resources. Sluice reads it from
``SLUICE_CONFIG`` as under the operator; the Spark queries from a JSON file
(``bench.structured_job``, ``bench.realtime_job``). Their reports (the driver's JSON
log, the queries' progress files) are parsed into :class:`~bench.batches.BatchRecord`
as they come.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from bench.batches import BatchRecord, from_sluice, from_structured
from bench.processes import Child, Event, JsonLines
from sluice_dev.paths import REPO_ROOT

TRANSFORM: Final = "sluice_job.examples.events:transform"
STOP_GRACE: Final = 120.0


class System(StrEnum):
    SLUICE = "sluice"
    STRUCTURED = "structured"
    REALTIME = "realtime"
    LOW_LATENCY = "lowlatency"
    """Sluice's driver with ``trigger.mode: LowLatency`` (interval 0)."""

    @property
    def display(self) -> str:
        return DISPLAY[self]


DISPLAY: Final = {
    System.SLUICE: "Sluice",
    System.STRUCTURED: "Structured Streaming",
    System.REALTIME: "Real-Time Mode",
    System.LOW_LATENCY: "Sluice low-latency",
}
DRIVERS: Final = (System.SLUICE, System.LOW_LATENCY)
"""The contenders that are Sluice's driver (the rest are Spark queries)."""
JOBS: Final = {System.STRUCTURED: "bench.structured_job", System.REALTIME: "bench.realtime_job"}
"""The module each Spark contender runs as (``python -m``)."""


class ContenderFailedError(RuntimeError):
    """A contender exited or stalled; the message holds the tail of its log."""


@dataclass(frozen=True)
class Target:
    """Where a contender reads and writes in one phase."""

    bootstrap: str
    contact: str
    keyspace: str
    topic: str
    table: str
    partitions: int
    cap: int
    interval: float
    driver_memory: str
    sink_batch_rows: int = 0
    """``sink.cassandra.batchRows``; 0 leaves the spec's default."""
    sink_batch_bytes: int = 0
    """``sink.cassandra.batchBytes``; 0 leaves the spec's default."""
    checkpoint_seconds: float = 5.0
    """Real-Time Mode's batch duration (how often it checkpoints; not a latency)."""
    dead_letter_topic: str | None = None
    """Sluice's ``deadLetter.kafka.topic`` (``--dead-letter``); ``None``: none, so a
    reject would fail the batch and the rejects are counted before each write."""


def pipeline_spec(target: Target, system: System = System.SLUICE) -> dict[str, Any]:
    """The StreamingPipeline spec every contender runs (camelCase, as users write it);
    Sluice low-latency's has ``trigger.mode: LowLatency`` and no interval."""
    trigger: dict[str, Any] = (
        {"mode": "LowLatency", "intervalSeconds": 0}
        if system is System.LOW_LATENCY
        else {"intervalSeconds": target.interval}
    )
    cassandra = {"contactPoints": [target.contact], "keyspace": target.keyspace}
    batching = {
        key: value
        for key, value in (
            ("batchRows", target.sink_batch_rows),
            ("batchBytes", target.sink_batch_bytes),
        )
        if value
    }
    dead_letter = (
        {"deadLetter": {"kafka": {"topic": target.dead_letter_topic}}}
        if target.dead_letter_topic is not None and system in DRIVERS
        else {}
    )
    return {
        "image": "local/sluice-bench",
        "source": {
            "kafka": {
                "bootstrapServers": target.bootstrap,
                "topics": [target.topic],
                "startingOffsets": "earliest",
                "maxRecordsPerPartition": target.cap,
            }
        },
        "transform": {"entrypoint": TRANSFORM, "options": {}},
        "sink": {"cassandra": {**cassandra, "table": target.table, **batching}},
        "checkpoint": {"cassandra": cassandra},
        "trigger": trigger,
        "spark": {"driver": {"cores": 2, "memory": target.driver_memory}},
        **dead_letter,
    }


SPARK_CONF: Final = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def child_env(jars: str, extra: Mapping[str, str]) -> dict[str, str]:
    """Environment shared by both contenders: the same jars and Spark settings."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "PYSPARK_PYTHON": sys.executable,
        "SLUICE_SPARK_JARS": jars,
        "SLUICE_SPARK_CONF": json.dumps(SPARK_CONF),
        **extra,
    }


@dataclass
class Contender:
    """A running contender: its process, its report file and the batches so far."""

    system: System
    child: Child
    reports: JsonLines
    parse: Callable[[Event], BatchRecord | None]
    is_ready: Callable[[Event], bool]
    batches: list[BatchRecord] = field(default_factory=list)
    ready: bool = False

    def poll(self) -> None:
        """Take in new reports; raises if the process has exited."""
        for event in self.reports.read_new():
            self.ready = self.ready or self.is_ready(event)
            batch = self.parse(event)
            if batch is not None:
                self.batches.append(batch)
        code = self.child.exited()
        if code is not None:
            raise ContenderFailedError(
                f"{self.system.display} exited with code {code}; log {self.child.log}:\n"
                f"{self.child.tail()}"
            )

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches)

    def wait(self, done: Callable[[Contender], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if done(self):
                return
            if time.monotonic() > deadline:
                raise ContenderFailedError(
                    f"{self.system.display}: no {what} after {timeout:.0f}s; log {self.child.log}:"
                    f"\n{self.child.tail()}"
                )
            time.sleep(0.2)

    def stop(self) -> int:
        """Clean stop (SIGTERM: the batch in flight finishes); the last reports are read."""
        code = self.child.stop(STOP_GRACE)
        for event in self.reports.read_new():
            batch = self.parse(event)
            if batch is not None:
                self.batches.append(batch)
        return code


def run_name(pipeline: str, epoch: int) -> str:
    """A process's file names: the pipeline's, and its epoch after a restart."""
    return pipeline if epoch == 1 else f"{pipeline}-epoch{epoch}"


def start_sluice(
    system: System,
    target: Target,
    pipeline: str,
    namespace: str,
    workdir: Path,
    env: Mapping[str, str],
    epoch: int = 1,
) -> Contender:
    """The real driver, ``python -m sluice_job``, configured as the operator would;
    ``epoch`` as the operator would number a replacement."""
    name = run_name(pipeline, epoch)
    log = workdir / f"{system.value}-{name}.log"
    driver_env = {
        **env,
        "SLUICE_CONFIG": json.dumps(pipeline_spec(target, system)),
        "SLUICE_PIPELINE": pipeline,
        # Each driver contender its own checkpoint key (cluster/namespace/name).
        "SLUICE_NAMESPACE": namespace if system is System.SLUICE else f"{namespace}-{system.value}",
        "SLUICE_CLUSTER_ID": "bench",
        "SLUICE_EPOCH": str(epoch),
        "SLUICE_TERMINATION_LOG": str(workdir / f"sluice-{name}.termination.json"),
    }
    child = Child.start(
        system.value, [sys.executable, "-m", "sluice_job"], driver_env, log, cwd=workdir
    )
    return Contender(
        system,
        child,
        JsonLines(log),
        from_sluice,
        lambda event: event.get("event") == "claimed",
    )


def start_spark_query(
    system: System,
    target: Target,
    pipeline: str,
    workdir: Path,
    env: Mapping[str, str],
    epoch: int = 1,
) -> Contender:
    """A Spark query on the same spec: ``python -m bench.structured_job`` (the
    baseline) or ``python -m bench.realtime_job`` (Real-Time Mode). A restart
    (``epoch`` > 1) continues from the same checkpoint directory, its writes
    versioned with that epoch."""
    name = run_name(pipeline, epoch)
    progress = workdir / f"{system.value}-{name}.progress.jsonl"
    config = workdir / f"{system.value}-{name}.json"
    config.write_text(
        json.dumps(
            {
                "spec": pipeline_spec(target),
                "name": f"bench-{pipeline}",
                "checkpoint_dir": str(workdir / f"{system.value}-{pipeline}.checkpoint"),
                "progress_file": str(progress),
                "max_offsets_per_trigger": target.cap * target.partitions,
                "checkpoint_seconds": target.checkpoint_seconds,
                "epoch": epoch,
                "task_slots": target.partitions if system is System.REALTIME else 0,
            }
        )
    )
    log = workdir / f"{system.value}-{name}.log"
    argv = [sys.executable, "-m", JOBS[system], "--config", str(config)]
    child = Child.start(system.value, argv, env, log, cwd=workdir)
    return Contender(
        system,
        child,
        JsonLines(progress),
        _structured_progress,
        lambda event: event.get("event") == "started",
    )


def _structured_progress(event: Event) -> BatchRecord | None:
    if event.get("event") != "progress":
        return None
    return from_structured(event["progress"])


def start(
    system: System,
    target: Target,
    pipeline: str,
    namespace: str,
    workdir: Path,
    env: Mapping[str, str],
    epoch: int = 1,
) -> Contender:
    if system in DRIVERS:
        return start_sluice(system, target, pipeline, namespace, workdir, env, epoch)
    return start_spark_query(system, target, pipeline, workdir, env, epoch)
