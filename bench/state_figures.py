"""Figures of ``bench.state``: a contender's drain of the same backlog, from its
driver's ``batch`` log events, and the table that sets the stateful contenders beside
the stateless one (pure functions)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.stats import percentile

Event = Mapping[str, Any]


@dataclass(frozen=True)
class Drain:
    """One contender's run: its batches after the first (the first warms the JVM up)."""

    contender: str
    batches: int
    records: int
    records_per_s: float
    batch_p50_s: float
    batch_p99_s: float
    write_p50_s: float
    exact: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def drain(contender: str, events: Sequence[Event], *, exact: bool) -> Drain:
    """The contender's figures from its driver's log events."""
    batches = [e for e in events if e.get("event") == "batch" and e.get("records")]
    steady = batches[1:] or batches
    if not steady:
        raise ValueError(f"{contender}: the driver committed no batch with records")
    seconds = [float(b["batch_s"]) for b in steady]
    records = sum(int(b["records"]) for b in steady)
    return Drain(
        contender,
        len(steady),
        records,
        records / sum(seconds),
        statistics.median(seconds),
        percentile(seconds, 99),
        statistics.median(float(b["write_s"]) for b in steady),
        exact,
    )


def summary(runs: Sequence[Sequence[Drain]]) -> list[dict[str, Any]]:
    """Per contender, medians over the runs, and its rate as a share of the first
    contender's (the stateless baseline) in the same runs."""
    by_name: dict[str, list[Drain]] = {}
    for run in runs:
        for drained in run:
            by_name.setdefault(drained.contender, []).append(drained)
    baseline = statistics.median(d.records_per_s for d in next(iter(by_name.values())))
    rows = []
    for name, found in by_name.items():
        rate = statistics.median(d.records_per_s for d in found)
        rows.append(
            {
                "contender": name,
                "records_per_s": round(rate, 1),
                "of_stateless": round(rate / baseline, 3),
                "batch_p50_s": round(statistics.median(d.batch_p50_s for d in found), 3),
                "batch_p99_s": round(statistics.median(d.batch_p99_s for d in found), 3),
                "write_p50_s": round(statistics.median(d.write_p50_s for d in found), 3),
                "exact_runs": sum(d.exact for d in found),
                "runs": len(found),
            }
        )
    return rows


def markdown(rows: Sequence[Mapping[str, Any]], records: int, per_batch: int) -> str:
    lines = [
        f"# The cost of state: one backlog of {records:,} records, batches of "
        f"{per_batch:,}, medians of runs",
        "",
        "| contender | records/s | of stateless | batch p50 s | batch p99 s | write p50 s "
        "| exact |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['contender']} | {r['records_per_s']:,.0f} | {r['of_stateless']:.2f} "
            f"| {r['batch_p50_s']:.2f} | {r['batch_p99_s']:.2f} | {r['write_p50_s']:.2f} "
            f"| {r['exact_runs']}/{r['runs']} |"
        )
    if any(str(r["contender"]).startswith("ss-") for r in rows):
        lines += [
            "",
            "ss-dedup and ss-visitors: Structured Streaming on the same topic and tables "
            "(dropDuplicatesWithinWatermark; approx_count_distinct per window, which is not "
            "exact by design), its state in the query's checkpoint; batches of the same size.",
        ]
    return "\n".join(lines) + "\n"
