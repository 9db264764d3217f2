"""The summary of several runs: the median of each figure, and each run's row.

``make bench`` runs the whole benchmark ``--runs`` times (3 by default), each run
with fresh topics and a fresh keyspace, and writes each run's document as usual.
The summary document holds, under ``summary``, the run documents' figure sections
(``systems``, ``ceiling``, ``fraction_of_ceiling``, ``comparison``, ``rates``) with,
in every place, the median of that figure over the runs that have it: ratios and
shares are medians of the per-run ratios (each measured within one run), not ratios
of medians. Two exceptions:

* a latency phase's ``sustained`` is true when the contender sustained it in a
  majority of the runs (``sustained_runs`` of ``runs`` says how many); its latency
  percentiles are medians over the runs that sustained it only (a figure of a phase
  that fell behind is never a latency);
* ``targets`` are judged again on the medians, not voted.

The plot is the median run's: the run whose Sluice / Structured Streaming
throughput ratio is the median one. Pure functions, except that
:func:`build` takes the time.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from bench import markdown, report
from bench.contenders import System
from bench.markdown import latency_cell
from bench.report import get
from bench.run import PHASES

FIGURES: Final = ("systems", "ceiling", "fraction_of_ceiling", "comparison", "rates")
LATENCY_FIGURES: Final = ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "max_ms")
"""A latency phase's figures that are latencies (left out of the median when the
phase was not sustained)."""
RUN_LATENCY: Final = ("rate", "sustained", "n", "p50_ms", "p99_ms", "probes_missing", "pacing")
"""A latency phase's figures in the summary's row of a run."""


def median_of(values: Sequence[Any]) -> Any:
    """The median of values that may be mappings (per key, recursively), numbers,
    booleans (the majority) or anything else (kept when all runs agree, else
    ``None``). ``None`` values are left out; ``None`` when nothing is left."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, Mapping) for v in present):
        keys = list(dict.fromkeys(k for v in present for k in v))
        return {k: median_of([v.get(k) for v in present]) for k in keys}
    if all(isinstance(v, bool) for v in present):
        return 2 * sum(present) > len(present)
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        middle = statistics.median(present)
        return middle if isinstance(middle, int) else round(float(middle), 3)
    return present[0] if all(v == present[0] for v in present) else None


def latency_only_when_sustained(phase: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A phase's figures with its latencies left out when it was not sustained."""
    if phase is None or phase.get("sustained"):
        return phase
    return {k: v for k, v in phase.items() if k not in LATENCY_FIGURES}


def median_systems(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for system in System:
        found = [doc["systems"][system.value] for doc in docs if system.value in doc["systems"]]
        if not found:
            continue
        medians = median_of([{k: v for k, v in f.items() if k != "latency"} for f in found])
        latency = {}
        for phase in PHASES:
            runs = [get(f, "latency", phase) for f in found]
            ran = [r for r in runs if r is not None]
            if not ran:
                continue
            entry = median_of([latency_only_when_sustained(r) for r in ran])
            kept = sum(1 for r in ran if r.get("sustained"))
            latency[phase] = {**entry, "sustained_runs": kept, "runs": len(ran)}
        result[system.value] = {**medians, "latency": latency}
    return result


def median_run(docs: Sequence[Mapping[str, Any]]) -> int:
    """The index of the run whose throughput ratio is the median (the lower middle
    for an even count; the first run when no run has the ratio)."""
    ranked = sorted(
        (doc["comparison"]["throughput"], index)
        for index, doc in enumerate(docs)
        if doc["comparison"].get("throughput") is not None
    )
    return ranked[(len(ranked) - 1) // 2][1] if ranked else 0


def run_row(doc: Mapping[str, Any]) -> dict[str, Any]:
    """One run's headline figures, for the summary's table of runs."""
    s, b = (doc["systems"][system.value] for system in (System.SLUICE, System.STRUCTURED))
    return {
        "stamp": doc["stamp"],
        "sluice_records_per_second": get(s, "throughput", "records_per_second"),
        "structured_records_per_second": get(b, "throughput", "records_per_second"),
        "throughput_ratio": get(doc, "comparison", "throughput"),
        "ceiling_records_per_second": get(doc, "ceiling", "records_per_second"),
        "fraction_of_ceiling": dict(doc.get("fraction_of_ceiling") or {}),
        "commit_p99_ms": get(s, "checkpoint", "commit", "p99_ms"),
        "checkpoint_p99_ratio": get(doc, "comparison", "checkpoint_p99"),
        "latency": {
            system.value: {
                phase: {
                    key: get(doc["systems"][system.value], "latency", phase, key)
                    for key in RUN_LATENCY
                }
                for phase in PHASES
                if get(doc["systems"], system.value, "latency", phase) is not None
            }
            for system in System
            if system.value in doc["systems"]
        },
    }


def build(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary document of ``docs`` (at least one run's): the medians under
    ``summary`` (``summary.comparison.throughput``, ``summary.ceiling.
    records_per_second``, ``summary.fraction_of_ceiling.sluice``, ``summary.systems.
    sluice.latency.target.sustained``, ...), each run's headline figures under
    ``each_run``."""
    if not docs:
        raise ValueError("a summary needs at least one run")
    middle = docs[median_run(docs)]
    medians: dict[str, Any] = {name: median_of([doc.get(name) for doc in docs]) for name in FIGURES}
    medians["systems"] = median_systems(docs)
    medians["targets"] = report.targets(medians)
    return {
        "schema_version": report.SCHEMA_VERSION,
        "label": middle["label"],
        "stamp": f"{docs[0]['stamp']}-summary",
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": len(docs),
        "median_run": middle["stamp"],
        "machine": middle["machine"],
        "parameters": middle["parameters"],
        "workload": middle["workload"],
        "summary": medians,
        "method": {
            **report.METHOD,
            "summary": "the median of each figure over the runs (bench.summary)",
        },
        "each_run": [run_row(doc) for doc in docs],
    }


def _num(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _share(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def _latency(row: Mapping[str, Any], system: System, phase: str) -> str:
    found = get(row, "latency", system.value, phase)
    return latency_cell(found)


def runs_table(summary: Mapping[str, Any]) -> list[str]:
    """One line per run: throughput, ceiling and shares, latency p99 per phase."""
    phases = [p for p in PHASES if any(get(r, "latency", "sluice", p) for r in summary["each_run"])]
    head = [
        "run",
        "Sluice (records/s)",
        "SS (records/s)",
        "Sluice / SS",
        "ceiling (rows/s)",
        "Sluice / ceiling",
        "SS / ceiling",
        "commit p99 (ms)",
        "checkpoint p99 Sluice / SS",
        *(f"latency p50 / p99, {phase}: Sluice; SS (ms)" for phase in phases),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in summary["each_run"]:
        shares = row["fraction_of_ceiling"]
        cells = [
            row["stamp"],
            _num(row["sluice_records_per_second"]),
            _num(row["structured_records_per_second"]),
            _num(row["throughput_ratio"], 2),
            _num(row["ceiling_records_per_second"]),
            _share(shares.get(System.SLUICE.value)),
            _share(shares.get(System.STRUCTURED.value)),
            _num(row["commit_p99_ms"], 1),
            _num(row["checkpoint_p99_ratio"], 2),
            *(
                f"{_latency(row, System.SLUICE, p)}; {_latency(row, System.STRUCTURED, p)}"
                for p in phases
            ),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def to_markdown(found: Mapping[str, Any]) -> str:
    summary = {**found, **found["summary"]}  # the run documents' shape, with medians
    runs = summary["runs"]
    title = (
        f"## {markdown.versus(summary)}: median of {runs} runs "
        f"({summary['label']}, {summary['stamp']})"
        if runs > 1
        else f"## {markdown.versus(summary)} ({summary['label']} run, {summary['median_run']})"
    )
    lines = [title, "", *markdown.smoke_warning(summary["parameters"], summary["label"])]
    lines += [*markdown.description(summary), ""]
    if runs > 1:
        lines += [
            f"Each figure is the median over {runs} runs (fresh topics and keyspace each); "
            "latency percentiles over the runs that sustained the phase. The plot is run "
            f"{summary['median_run']}'s (the median throughput ratio).",
            "",
        ]
    lines += [*markdown.table(summary), "", *markdown.footnotes(summary)]
    lines += ["", "### Each run", "", *runs_table(summary)]
    return "\n".join(lines) + "\n"
