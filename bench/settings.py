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
    latency_seconds: float = 60.0
    warmup_seconds: float = 10.0
    trigger_seconds: float = 1.0
    sample_every: int = 100
    poll_interval: float = 0.05
    order: tuple[System, ...] = (System.STRUCTURED, System.SLUICE)
    driver_memory: str = "2g"
    run_timeout: float = 900.0
    drain_timeout: float = 60.0
    verify: bool = True
    keep: bool = False
    label: str = "full"
    results: Path = RESULTS

    def public(self) -> dict[str, Any]:
        """The parameters as plain JSON values (for the results file)."""
        values = dataclasses.asdict(self)
        values["order"] = [s.value for s in self.order]
        values["results"] = str(self.results)
        return values


SMOKE: Final[dict[str, Any]] = {
    "events": 100_000,
    "cap": 5_000,
    "latency_seconds": 30.0,
    "warmup_seconds": 5.0,
    "run_timeout": 600.0,
    "label": "smoke",
}

FLAGS: Final = {
    "events": "backlog size (events) of the throughput phase",
    "partitions": "partitions of every topic",
    "cap": "records per partition per batch (both systems)",
    "rate": "events/s produced in the latency phase",
    "latency_seconds": "measured seconds of the latency phase (after warm-up)",
    "warmup_seconds": "seconds produced before probes start",
    "trigger_seconds": "micro-batch interval of the latency phase",
    "sample_every": "every n-th event of the latency phase is a probe",
    "poll_interval": "seconds between visibility polls of Cassandra",
    "driver_memory": "spark.driver.memory of both contenders",
    "run_timeout": "seconds a contender may take to drain the backlog",
    "drain_timeout": "seconds to wait for the last probes after producing",
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
    result.add_argument("--order", default=None, help="comma-separated: structured,sluice")
    result.add_argument("--results", type=Path, default=None, help="results directory")
    result.add_argument("--no-verify", action="store_true", help="skip counting sink rows")
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
    values["keep"] = bool(args.keep or env.get("BENCH_KEEP"))
    return dataclasses.replace(base, **values)
