"""The executor run's pure parts: the pipeline each mode runs, and the figures and
summary made of what its driver logged (``bench.executors`` does the running).

Two modes of one pipeline, both a driver pod of the real operator on the local
control plane, the same spec but for where Spark runs its tasks: **local** (the
default, ``spark.executors.instances: 0``: ``local[2]`` inside the driver pod) and
**executors** (two executor pods of one core each, which Spark's Kubernetes backend
asks the API server for, placed by the scheduler on the stack's two nodes). Both have
two task slots on the same two-core machine, so the comparison is of correctness and
overhead, never of speed-up.

Per mode, from the driver's ``batch`` log events:

* **backlog**: records/s draining a backlog (from the end of the first batch, which
  starts the Python workers, to the end of the last),
  and the start-up (``kubectl apply`` to the end of the first committed batch);
* **paced**: small batches of a steady low rate (trigger 1 s): the median and p90 of
  a batch's duration (``batch_s``) and of its read, transform and write phases. The
  **per-batch scheduling overhead** of executors is the median paced batch of the
  executors mode minus the local mode's, measured in the same run;
* **exact**: every event produced is in the sink once (rows = events), the batch ids
  committed are 0..n-1 without a gap or a repeat, and their records add up to the
  events produced.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from bench.batches import epoch_seconds
from bench.stats import Span, percentile, window
from sluice_operator import naming

TRANSFORM: Final = "sluice_job.examples.events:transform"
PHASES: Final = ("read_s", "transform_s", "write_s", "commit_s", "plan_s")


@dataclass(frozen=True)
class Mode:
    name: str
    executors: int

    @property
    def pipeline(self) -> str:
        return f"bench-{self.name}"

    @property
    def table(self) -> str:
        return f"events_{self.name}"


LOCAL: Final = Mode("local", 0)


def executors_mode(instances: int) -> Mode:
    return Mode("executors", instances)


@dataclass(frozen=True)
class Where:
    """Where a mode's pipeline reads and writes, and which image it runs."""

    namespace: str
    image: str
    bootstrap: str
    topic: str
    contact: str
    keyspace: str
    cap: int


def manifest(mode: Mode, where: Where) -> dict[str, Any]:
    """The StreamingPipeline of ``mode``: two task slots either way (``local[2]`` in a
    two-core driver, or a one-core driver with one-core executors, one per node)."""
    cassandra = {"contactPoints": [where.contact], "keyspace": where.keyspace}
    driver_cores = 2 if mode.executors == 0 else 1
    executors: dict[str, Any] = {"instances": mode.executors}
    if mode.executors:
        mine = [
            {"key": naming.LABEL_PIPELINE, "operator": "In", "values": [mode.pipeline]},
            {"key": naming.LABEL_ROLE, "operator": "In", "values": [naming.ROLE_EXECUTOR]},
        ]
        executors |= {
            "cores": 1,
            "memory": "768m",
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchExpressions": mine},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            },
        }
    return {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": naming.KIND,
        "metadata": {"name": mode.pipeline, "namespace": where.namespace},
        "spec": {
            "image": where.image,
            "source": {
                "kafka": {
                    "bootstrapServers": where.bootstrap,
                    "topics": [where.topic],
                    "startingOffsets": "earliest",
                    "maxRecordsPerPartition": where.cap,
                }
            },
            "transform": {"entrypoint": TRANSFORM},
            "sink": {"cassandra": {**cassandra, "table": mode.table}},
            "checkpoint": {"cassandra": cassandra},
            "trigger": {"intervalSeconds": 1},
            "spark": {
                "driver": {"cores": driver_cores, "memory": "1g"},
                "executors": executors,
            },
            "restart": {"backoffSeconds": 1, "maxBackoffSeconds": 8, "maxFailures": 3},
        },
    }


@dataclass(frozen=True)
class Batch:
    """A committed batch as the driver logged it (``batch`` event)."""

    batch_id: int
    records: int
    ended: float
    seconds: float
    phases: Mapping[str, float]

    @property
    def started(self) -> float:
        return self.ended - self.seconds


def batch_of(event: Mapping[str, Any]) -> Batch | None:
    """A ``batch`` log event (``ts`` is logged right after the commit); ``None`` for
    any other event."""
    if event.get("event") != "batch":
        return None
    return Batch(
        batch_id=int(event["batch_id"]),
        records=int(event["records"]),
        ended=epoch_seconds(str(event["ts"])),
        seconds=float(event["batch_s"]),
        phases={name: float(event.get(name, 0.0)) for name in PHASES},
    )


@dataclass(frozen=True)
class ModeResult:
    """One mode in one run: what was produced, seen and found in the sink."""

    mode: str
    executors: int
    applied_at: float
    backlog_events: int
    paced_events: int
    backlog: Sequence[Batch]
    paced: Sequence[Batch]
    rows_in_sink: int
    executor_nodes: Sequence[str]
    pods: str
    """``kubectl get pods -o wide`` of the namespace while the mode ran."""


def exactness(result: ModeResult) -> list[str]:
    """What is wrong with the run's output, in words; empty when it is exact."""
    produced = result.backlog_events + result.paced_events
    batches = [*result.backlog, *result.paced]
    problems = []
    if result.rows_in_sink != produced:
        problems.append(f"{result.rows_in_sink:,} rows in the sink for {produced:,} events")
    ids = [b.batch_id for b in batches if b.records]
    if len(ids) != len(set(ids)):
        problems.append("a batch id committed twice")
    counted = sum(b.records for b in batches)
    if counted != produced:
        problems.append(f"batches hold {counted:,} records for {produced:,} events")
    return problems


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def p90(values: Sequence[float]) -> float | None:
    return percentile(values, 90) if values else None


@dataclass(frozen=True)
class Figures:
    mode: str
    executors: int
    startup_seconds: float | None
    """``kubectl apply`` to the end of the first committed batch."""
    backlog_records_per_second: float | None
    paced_batches: int
    paced_batch_median: float | None
    paced_batch_p90: float | None
    paced_phase_medians: Mapping[str, float | None]
    exact: bool
    problems: Sequence[str]
    executor_nodes: Sequence[str]


def figures(result: ModeResult) -> Figures:
    first = min((b.ended for b in result.backlog), default=None)
    whole = window([Span(b.started, b.ended, b.records) for b in result.backlog], skip_first=True)
    paced = [b for b in result.paced if b.records]
    problems = exactness(result)
    return Figures(
        mode=result.mode,
        executors=result.executors,
        startup_seconds=None if first is None else first - result.applied_at,
        backlog_records_per_second=whole.records_per_second if whole else None,
        paced_batches=len(paced),
        paced_batch_median=median([b.seconds for b in paced]),
        paced_batch_p90=p90([b.seconds for b in paced]),
        paced_phase_medians={p: median([b.phases[p] for b in paced]) for p in PHASES},
        exact=not problems,
        problems=problems,
        executor_nodes=sorted(result.executor_nodes),
    )


@dataclass(frozen=True)
class Comparison:
    """One run: both modes and the executors' overhead against local mode."""

    local: Figures
    executors: Figures

    @property
    def overhead_seconds(self) -> float | None:
        a, b = self.local.paced_batch_median, self.executors.paced_batch_median
        return None if a is None or b is None else b - a

    @property
    def throughput_ratio(self) -> float | None:
        a, b = self.local.backlog_records_per_second, self.executors.backlog_records_per_second
        return None if not a or b is None else b / a

    def to_json(self) -> dict[str, Any]:
        return {
            "local": asdict(self.local),
            "executors": asdict(self.executors),
            "overhead_seconds": self.overhead_seconds,
            "throughput_ratio": self.throughput_ratio,
        }


def _median_of(values: Sequence[float | None]) -> float | None:
    return median([v for v in values if v is not None])


def summary(runs: Sequence[Comparison]) -> dict[str, Any]:
    """The median of each figure over the runs (each run compared within itself)."""

    def of(mode: str, name: str) -> float | None:
        return _median_of([getattr(getattr(run, mode), name) for run in runs])

    return {
        "runs": len(runs),
        "exact_runs": sum(run.local.exact and run.executors.exact for run in runs),
        "modes": {
            mode: {
                name: of(mode, name)
                for name in (
                    "startup_seconds",
                    "backlog_records_per_second",
                    "paced_batch_median",
                    "paced_batch_p90",
                )
            }
            | {
                "paced_phase_medians": {
                    phase: _median_of(
                        [getattr(run, mode).paced_phase_medians.get(phase) for run in runs]
                    )
                    for phase in PHASES
                }
            }
            for mode in ("local", "executors")
        },
        "overhead_seconds": _median_of([run.overhead_seconds for run in runs]),
        "overhead_per_run": [run.overhead_seconds for run in runs],
        "throughput_ratio": _median_of([run.throughput_ratio for run in runs]),
    }


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}/s"


def markdown(found: Mapping[str, Any], executors: int) -> str:
    """The summary as a Markdown table, with the overhead and the ratio under it."""
    modes = found["modes"]
    local, remote = modes["local"], modes["executors"]
    rows = [
        ("start-up (apply to first commit)", "startup_seconds", _seconds),
        ("backlog drain", "backlog_records_per_second", _rate),
        ("paced batch, median", "paced_batch_median", _seconds),
        ("paced batch, p90", "paced_batch_p90", _seconds),
    ]
    lines = [
        f"Executors run: median of {found['runs']} runs "
        f"({found['exact_runs']} of them exact in both modes)",
        "",
        f"| | local mode (`local[2]` in the driver pod) | {executors} executor pods |",
        "|---|---|---|",
        *(f"| {label} | {show(local[key])} | {show(remote[key])} |" for label, key, show in rows),
        *(
            f"| paced {phase.removesuffix('_s')}, median | "
            f"{_seconds(local['paced_phase_medians'][phase])} | "
            f"{_seconds(remote['paced_phase_medians'][phase])} |"
            for phase in PHASES
        ),
        "",
        f"Per-batch scheduling overhead of executors (median paced batch, executors - local): "
        f"{_seconds(found['overhead_seconds'])} (median of the runs: "
        f"{', '.join(_seconds(v) for v in found['overhead_per_run'])})",
    ]
    ratio = found["throughput_ratio"]
    if ratio is not None:
        lines.append(
            f"Backlog drain with executors / local mode: {ratio:.2f} (same two cores: "
            "an overhead figure, not a speed-up claim)"
        )
    return "\n".join(lines) + "\n"
