"""The benchmark's parameters: command-line flags, each defaulting to a ``BENCH_*``
environment variable, then to the full run's value. ``--smoke`` (or
``BENCH_SMOKE=1``) switches the defaults to a quick check that everything works
end to end; flags still override it."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.ceiling import Plan
from bench.contenders import System
from sluice_dev.paths import REPO_ROOT

RESULTS: Final = REPO_ROOT / "bench" / "results"


@dataclass(frozen=True)
class Settings:
    events: int = 1_000_000
    partitions: int = 8
    cap: int = 25_000
    """Records per partition per batch: Sluice's ``maxRecordsPerPartition``; the
    baseline's ``maxOffsetsPerTrigger`` is ``cap * partitions``."""
    rate: float = 5_000.0
    """Events/s of the latency phase at the issue's target rate (reported per
    contender as not sustained when it fell behind)."""
    sustained_share: float = 0.7
    """The other latency phase runs at this share of the slower contender's backlog
    records/s, rounded down to two significant digits (``bench.pacing``)."""
    behind_triggers: float = 5.0
    """A contender fell behind when, as the last event is produced, the events not
    yet in a finished batch exceed this many trigger intervals' worth."""
    latency_seconds: float = 60.0
    warmup_seconds: float = 10.0
    trigger_seconds: float = 1.0
    sample_every: int = 100
    poll_interval: float = 0.05
    order: tuple[System, ...] = (
        System.STRUCTURED,
        System.REALTIME,
        System.SLUICE,
        System.LOW_LATENCY,
    )
    realtime_checkpoint_seconds: float = 5.0
    """Real-Time Mode's batch duration: how often it checkpoints (at least 5 s)."""
    driver_memory: str = "2g"
    run_timeout: float = 1800.0
    """The baseline's per-row writer drained 1,100-1,900 records/s in smoke runs on a
    busy 2-CPU machine: a million records can take 15 minutes."""
    drain_timeout: float = 60.0
    kill_rate: float = 2_000.0
    """Events/s of the kill phase (``bench.kill``): below every contender's backlog rate."""
    kill_seconds: float = 30.0
    """Seconds produced in the kill phase; 0 skips it."""
    kill_after: float = 12.0
    """Seconds into producing when the contender is SIGKILLed."""
    ceiling_rows: int = 0
    """Rows the ceiling writes; 0: ``events``."""
    ceiling_processes: int = 0
    """Processes of the ceiling; 0: the CPU count."""
    ceiling_concurrency: int = 64
    ceiling_batch_rows: int = 50
    ceiling_batch_bytes: int = 9_000
    sink_batch_rows: int = 0
    """Sluice's ``sink.cassandra.batchRows``; 0: the spec's default."""
    sink_batch_bytes: int = 0
    """Sluice's ``sink.cassandra.batchBytes``; 0: the spec's default."""
    runs: int = 3
    dead_letter: bool = False
    """Give Sluice's contenders a dead-letter topic: the rejects are then counted beside
    each write instead of before it (``sluice_job.execute``)."""
    verify: bool = True
    keep: bool = False
    label: str = "full"
    results: Path = RESULTS

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"runs must be at least 1, not {self.runs}")
        if not 0.0 < self.sustained_share <= 1.0:
            raise ValueError(f"sustained share must be in (0, 1], not {self.sustained_share}")
        if self.kill_seconds > 0 and not 0 < self.kill_after < self.kill_seconds:
            raise ValueError(
                f"kill after must be within the kill phase's {self.kill_seconds:g} s, "
                f"not {self.kill_after:g}"
            )
        if self.behind_triggers <= 0:
            raise ValueError(f"behind triggers must be positive, not {self.behind_triggers}")

    def public(self) -> dict[str, Any]:
        """The parameters as plain JSON values (for the results file)."""
        values = dataclasses.asdict(self)
        values["order"] = [s.value for s in self.order]
        values["results"] = str(self.results)
        return values

    def ceiling_plan(self) -> Plan:
        return Plan(
            rows=self.ceiling_rows or self.events,
            processes=self.ceiling_processes or os.cpu_count() or 1,
            concurrency=self.ceiling_concurrency,
            batch_rows=self.ceiling_batch_rows,
            batch_bytes=self.ceiling_batch_bytes,
        )


SMOKE: Final[dict[str, Any]] = {
    "events": 100_000,
    "cap": 5_000,
    "latency_seconds": 15.0,
    "warmup_seconds": 5.0,
    "kill_seconds": 16.0,
    "kill_after": 6.0,
    "run_timeout": 600.0,
    "ceiling_rows": 50_000,
    "runs": 1,
    "label": "smoke",
}

FLAGS: Final = {
    "events": "backlog size (events) of the throughput phase",
    "partitions": "partitions of every topic",
    "cap": "records per partition per batch (both systems)",
    "runs": "whole runs (fresh topics and keyspace each); the summary holds their medians",
    "rate": "events/s of the latency phase at the target rate",
    "sustained_share": "the other latency phase's rate: this share of the slower backlog rate",
    "behind_triggers": "fell behind: unprocessed events at the end of producing > this many "
    "trigger intervals' worth",
    "latency_seconds": "measured seconds of the latency phase (after warm-up)",
    "warmup_seconds": "seconds produced before probes start",
    "trigger_seconds": "micro-batch interval of the latency phase",
    "sample_every": "every n-th event of the latency phase is a probe",
    "poll_interval": "seconds between visibility polls of Cassandra",
    "realtime_checkpoint_seconds": "Real-Time Mode's batch duration (its checkpoint interval)",
    "driver_memory": "spark.driver.memory of every contender",
    "run_timeout": "seconds a contender may take to drain the backlog",
    "drain_timeout": "seconds to wait for the last probes after producing",
    "kill_rate": "events/s of the kill phase",
    "kill_seconds": "seconds produced in the kill phase (0: no kill phase)",
    "kill_after": "seconds into the kill phase's producing when the contender is SIGKILLed",
    "ceiling_rows": "rows the ceiling writes (0: --events)",
    "ceiling_processes": "client processes of the ceiling (0: the CPU count)",
    "ceiling_concurrency": "requests in flight per ceiling process",
    "ceiling_batch_rows": "rows per unlogged batch of the ceiling",
    "ceiling_batch_bytes": "bytes of serialized values per batch of the ceiling",
    "sink_batch_rows": "Sluice's sink.cassandra.batchRows (0: the spec's default)",
    "sink_batch_bytes": "Sluice's sink.cassandra.batchBytes (0: the spec's default)",
    "label": "label of the results (full, smoke, ...)",
}


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="python -m bench",
        description="Sluice's loop against Spark Structured Streaming on the local stack.",
    )
    result.add_argument("--smoke", action="store_true", help="quick defaults: " + str(SMOKE))
    for name, text in FLAGS.items():
        kind = type(getattr(Settings(), name))
        flag = "--" + name.replace("_", "-")
        result.add_argument(flag, type=kind, default=None, help=f"{text} (BENCH_{name.upper()})")
    result.add_argument(
        "--order", default=None, help="comma-separated: structured,realtime,sluice,lowlatency"
    )
    result.add_argument("--results", type=Path, default=None, help="results directory")
    result.add_argument("--no-verify", action="store_true", help="skip counting sink rows")
    result.add_argument(
        "--dead-letter",
        action="store_true",
        help="a dead-letter topic for Sluice's contenders (BENCH_DEAD_LETTER)",
    )
    result.add_argument("--keep", action="store_true", help="keep topics and keyspace")
    return result


def from_args(argv: Sequence[str] | None, env: Mapping[str, str] = os.environ) -> Settings:
    args = parser().parse_args(argv)
    smoke = args.smoke or env.get("BENCH_SMOKE", "") not in ("", "0")
    base = dataclasses.replace(Settings(), **SMOKE) if smoke else Settings()
    values: dict[str, Any] = {}
    for name in FLAGS:
        kind = type(getattr(base, name))
        given = getattr(args, name)
        from_env = env.get(f"BENCH_{name.upper()}")
        if given is not None:
            values[name] = given
        elif from_env:
            values[name] = kind(from_env)
    order = args.order or env.get("BENCH_ORDER")
    if order:
        values["order"] = tuple(System(part.strip()) for part in order.split(","))
    if args.results or env.get("BENCH_RESULTS"):
        values["results"] = Path(args.results or env["BENCH_RESULTS"])
    values["verify"] = not (args.no_verify or env.get("BENCH_NO_VERIFY"))
    values["dead_letter"] = bool(args.dead_letter or env.get("BENCH_DEAD_LETTER"))
    values["keep"] = bool(args.keep or env.get("BENCH_KEEP"))
    try:
        return dataclasses.replace(base, **values)
    except ValueError as err:
        parser().error(str(err))
