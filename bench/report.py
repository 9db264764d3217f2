"""The results: one JSON document, a Markdown table made from it, the files on disk.

Everything here is a pure function of the run's outcome except :func:`write`.
Ratios are Sluice over Structured Streaming, measured in the same run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from bench.batches import (
    SLUICE_COMMIT,
    STRUCTURED_COMMIT,
    BatchRecord,
)
from bench.contenders import TRANSFORM, System
from bench.run import LatencyRun, Outcome, ThroughputRun
from bench.settings import Settings
from bench.stats import Summary, ratio, window
from sluice_dev import versions

SCHEMA_VERSION: Final = 1
WRITER: Final = "sluice_job.sinks.cassandra.CassandraSink.write (write_rows via foreachPartition)"
COMMIT_KEY: Final = {System.SLUICE: SLUICE_COMMIT, System.STRUCTURED: STRUCTURED_COMMIT}
COMMIT_WHAT: Final = {
    System.SLUICE: "commit_lwt_s: the commit LWT",
    System.STRUCTURED: "durationMs.commitOffsets: commit-log write",
}
CHECKPOINT_WHAT: Final = {
    System.SLUICE: "plan LWT (plan_s) + commit LWT + batch-history INSERT (commit_s)",
    System.STRUCTURED: "durationMs.walCommit + durationMs.commitOffsets",
}
TARGETS: Final = {
    "throughput_ratio_min": 1.1,
    "commit_p99_ms_max": 20.0,
    "commit_p99_share_max": 0.2,
}

METHOD: Final = {
    "throughput": (
        "backlog records / (end of the last batch - start of the first), from each "
        "system's per-batch reports; JVM start-up excluded (see process_seconds)"
    ),
    "throughput_steady": "the same without the first batch (its warm-up)",
    "commit": "per batch, all batches with records of both phases",
    "checkpoint": "everything a batch spends on making its progress durable",
    "latency": (
        "produce time (bench process, before handing the event to the Kafka producer) "
        "to the return of the first Cassandra SELECT that saw its row; polled every "
        "poll_interval seconds, so an upper bound late by at most one interval + one "
        "round trip; probes produced during warm-up are not measured"
    ),
}


def _dump(summary: Summary | None) -> dict[str, Any] | None:
    return dataclasses.asdict(summary) if summary else None


def _ms(values: Sequence[float]) -> list[float]:
    return [round(v * 1000.0, 2) for v in values]


def _busy(*runs: ThroughputRun | LatencyRun | None) -> list[BatchRecord]:
    return [b for run in runs if run is not None for b in run.batches if b.records > 0]


def throughput_results(run: ThroughputRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    spans = [b.span for b in run.batches]
    whole, steady = window(spans), window(spans, skip_first=True)
    return {
        "records": whole.records if whole else 0,
        "batches": whole.batches if whole else 0,
        "seconds": round(whole.seconds, 3) if whole else None,
        "records_per_second": round(whole.records_per_second, 1) if whole else None,
        "steady_records_per_second": round(steady.records_per_second, 1) if steady else None,
        "process_seconds": round(run.process_seconds, 2),
        "rows_in_sink": run.rows_in_sink,
        "phases": {
            name: _dump(Summary.of_seconds([b.phases[name] for b in run.batches if b.records]))
            for name in sorted({k for b in run.batches for k in b.phases})
        },
    }


def checkpoint_results(system: System, batches: Sequence[BatchRecord]) -> dict[str, Any]:
    names = sorted({k for b in batches for k in b.checkpoint})
    return {
        "batches": len(batches),
        "commit": _dump(Summary.of_seconds([b.checkpoint[COMMIT_KEY[system]] for b in batches])),
        "commit_is": COMMIT_WHAT[system],
        "total": _dump(Summary.of_seconds([b.checkpoint_total for b in batches])),
        "total_is": CHECKPOINT_WHAT[system],
        "parts": {n: _dump(Summary.of_seconds([b.checkpoint[n] for b in batches])) for n in names},
    }


def latency_results(run: LatencyRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        **(_dump(Summary.of_seconds(run.latencies)) or {"n": 0}),
        "probes_missing": run.missing,
        "events_produced": run.produced.events,
        "produce_rate": round(run.produced.rate, 1),
        "poll_rounds": run.poll_rounds,
        "poll_errors": run.poll_errors,
        "poll_period_ms": round(1000 * run.poll_seconds / run.poll_rounds, 1)
        if run.poll_rounds
        else None,
        "batches": sum(1 for b in run.batches if b.records > 0),
    }


def system_results(outcome: Outcome, system: System) -> dict[str, Any]:
    throughput, latency = outcome.throughput.get(system), outcome.latency.get(system)
    return {
        "title": system.display,
        "throughput": throughput_results(throughput),
        "checkpoint": checkpoint_results(system, _busy(throughput, latency)),
        "latency": latency_results(latency),
    }


def samples(outcome: Outcome, system: System) -> dict[str, list[float]]:
    throughput, latency = outcome.throughput.get(system), outcome.latency.get(system)
    batches = _busy(throughput, latency)
    return {
        "latency_ms": _ms(latency.latencies if latency else []),
        "commit_ms": _ms([b.checkpoint[COMMIT_KEY[system]] for b in batches]),
        "checkpoint_ms": _ms([b.checkpoint_total for b in batches]),
    }


def _get(doc: Mapping[str, Any], *path: str) -> Any:
    value: Any = doc
    for key in path:
        if not isinstance(value, Mapping) or value.get(key) is None:
            return None
        value = value[key]
    return value


def comparison(systems: Mapping[str, Any]) -> dict[str, Any]:
    s, b = systems[System.SLUICE.value], systems[System.STRUCTURED.value]
    return {
        "throughput": ratio(
            _get(s, "throughput", "records_per_second"), _get(b, "throughput", "records_per_second")
        ),
        "throughput_steady": ratio(
            _get(s, "throughput", "steady_records_per_second"),
            _get(b, "throughput", "steady_records_per_second"),
        ),
        "commit_p99": ratio(
            _get(s, "checkpoint", "commit", "p99_ms"), _get(b, "checkpoint", "commit", "p99_ms")
        ),
        "sluice_commit_p99_over_structured_checkpoint_p99": ratio(
            _get(s, "checkpoint", "commit", "p99_ms"), _get(b, "checkpoint", "total", "p99_ms")
        ),
        "checkpoint_p99": ratio(
            _get(s, "checkpoint", "total", "p99_ms"), _get(b, "checkpoint", "total", "p99_ms")
        ),
        "latency_p50": ratio(_get(s, "latency", "p50_ms"), _get(b, "latency", "p50_ms")),
        "latency_p99": ratio(_get(s, "latency", "p99_ms"), _get(b, "latency", "p99_ms")),
    }


def targets(systems: Mapping[str, Any], compared: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's targets, as figures (never asserted)."""
    commit_p99 = _get(systems, System.SLUICE.value, "checkpoint", "commit", "p99_ms")
    share = compared["sluice_commit_p99_over_structured_checkpoint_p99"]
    throughput = compared["throughput"]
    return {
        **TARGETS,
        "throughput_met": None
        if throughput is None
        else throughput >= TARGETS["throughput_ratio_min"],
        "commit_p99_met": None
        if commit_p99 is None
        else commit_p99 <= TARGETS["commit_p99_ms_max"],
        "commit_share_met": None if share is None else share <= TARGETS["commit_p99_share_max"],
    }


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "spark": versions.SPARK,
        "kafka": versions.KAFKA,
        "cassandra": versions.CASSANDRA,
    }


def build(
    settings: Settings, outcome: Outcome, started: datetime, load_before: Sequence[float]
) -> dict[str, Any]:
    systems = {s.value: system_results(outcome, s) for s in System}
    compared = comparison(systems)
    return {
        "schema_version": SCHEMA_VERSION,
        "label": settings.label,
        "stamp": outcome.names.stamp,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "load_average_before": [round(x, 2) for x in load_before]},
        "parameters": settings.public(),
        "workload": {
            "events": settings.events,
            "partitions": settings.partitions,
            "transform": TRANSFORM,
            "writer": WRITER,
            "sluice_max_records_per_partition": settings.cap,
            "structured_max_offsets_per_trigger": settings.cap * settings.partitions,
            "backlog_produce_seconds": round(outcome.backlog_seconds, 2),
        },
        "systems": systems,
        "comparison": compared,
        "targets": targets(systems, compared),
        "method": METHOD,
        "samples": {s.value: samples(outcome, s) for s in System},
        "logs": str(outcome.logs),
    }


# -- Markdown -----------------------------------------------------------------------


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _pair(summary: Mapping[str, Any] | None, digits: int = 1) -> str:
    if not summary or not summary.get("n"):
        return "-"
    return f"{_num(summary['p50_ms'], digits)} / {_num(summary['p99_ms'], digits)}"


def _latency(found: Mapping[str, Any] | None) -> str:
    """p50 / p99; probes never seen are named, since they are not in the percentiles."""
    missing = (found or {}).get("probes_missing") or 0
    return _pair(found, 0) + (f" ({missing:,} probes never seen)" if missing else "")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    s, b = doc["systems"][System.SLUICE.value], doc["systems"][System.STRUCTURED.value]
    c = doc["comparison"]

    def both(*path: str, digits: int = 0) -> list[str]:
        return [_num(_get(s, *path), digits), _num(_get(b, *path), digits)]

    return [
        [
            "throughput, backlog (records/s)",
            *both("throughput", "records_per_second"),
            _num(c["throughput"], 2),
        ],
        [
            "throughput without 1st batch (records/s)",
            *both("throughput", "steady_records_per_second"),
            _num(c["throughput_steady"], 2),
        ],
        ["backlog batches", *both("throughput", "batches"), ""],
        ["process start to backlog done (s)", *both("throughput", "process_seconds", digits=1), ""],
        [
            "commit per batch p50 / p99 (ms)",
            _pair(_get(s, "checkpoint", "commit")),
            _pair(_get(b, "checkpoint", "commit")),
            _num(c["commit_p99"], 2),
        ],
        [
            "checkpoint per batch p50 / p99 (ms)",
            _pair(_get(s, "checkpoint", "total")),
            _pair(_get(b, "checkpoint", "total")),
            _num(c["checkpoint_p99"], 2),
        ],
        ["batches measured for checkpoint cost", *both("checkpoint", "batches"), ""],
        [
            "end-to-end latency p50 / p99 (ms)",
            _latency(_get(s, "latency")),
            _latency(_get(b, "latency")),
            _num(c["latency_p99"], 2),
        ],
        [
            "latency probes seen / missing",
            f"{_num(_get(s, 'latency', 'n'))} / {_num(_get(s, 'latency', 'probes_missing'))}",
            f"{_num(_get(b, 'latency', 'n'))} / {_num(_get(b, 'latency', 'probes_missing'))}",
            "",
        ],
        ["latency phase produce rate (events/s)", *both("latency", "produce_rate"), ""],
    ]


def markdown(doc: Mapping[str, Any]) -> str:
    p, w = doc["parameters"], doc["workload"]
    lines = [f"## Sluice vs Spark Structured Streaming ({doc['label']} run, {doc['stamp']})", ""]
    if doc["label"] != "full":
        lines += [
            f"> **{doc['label'].upper()} RUN**: reduced parameters, figures prove the "
            "benchmark works end to end; they are not representative.",
            "",
        ]
    lines += [
        f"{w['events']:,} JSON events on {w['partitions']} partitions; transform "
        f"`{w['transform']}`; writer `{w['writer']}`. Cap {w['sluice_max_records_per_partition']:,}"
        f" records/partition/batch (Structured Streaming `maxOffsetsPerTrigger` "
        f"{w['structured_max_offsets_per_trigger']:,}). Latency: {p['rate']:,.0f} events/s, "
        f"{p['trigger_seconds']:g} s trigger, {p['latency_seconds']:g} s measured after "
        f"{p['warmup_seconds']:g} s warm-up, polled every {p['poll_interval'] * 1000:g} ms "
        f"(measured: Sluice {_num(_get(doc, 'systems', 'sluice', 'latency', 'poll_period_ms'))}"
        f" ms, SS {_num(_get(doc, 'systems', 'structured', 'latency', 'poll_period_ms'))} ms). "
        f"Spark {doc['machine']['spark']} local[2] for both; {doc['machine']['cpus']} CPUs, "
        f"load average before {doc['machine']['load_average_before'][0]}, after "
        f"{doc['machine']['load_average'][0]}.",
        "",
        _row(["metric", "Sluice", "Structured Streaming", "Sluice / SS"]),
        _row(["---", "---:", "---:", "---:"]),
        *(_row(r) for r in table_rows(doc)),
        "",
        "Commit: Sluice "
        + COMMIT_WHAT[System.SLUICE]
        + "; Structured Streaming "
        + COMMIT_WHAT[System.STRUCTURED]
        + ". Checkpoint: Sluice "
        + CHECKPOINT_WHAT[System.SLUICE]
        + "; Structured Streaming "
        + CHECKPOINT_WHAT[System.STRUCTURED]
        + ".",
        "",
        targets_line(doc["targets"], doc["comparison"]),
    ]
    return "\n".join(lines) + "\n"


def targets_line(t: Mapping[str, Any], c: Mapping[str, Any]) -> str:
    def verdict(met: bool | None) -> str:
        return "n/a" if met is None else ("met" if met else "MISSED")

    return (
        f"Targets: throughput >= {t['throughput_ratio_min']} x SS: "
        f"{verdict(t['throughput_met'])} ({_num(c['throughput'], 2)}); "
        f"Sluice commit p99 <= {t['commit_p99_ms_max']:g} ms: {verdict(t['commit_p99_met'])}; "
        f"<= {t['commit_p99_share_max']:g} x SS checkpoint p99: {verdict(t['commit_share_met'])} "
        f"({_num(c['sluice_commit_p99_over_structured_checkpoint_p99'], 2)})."
    )


def write(doc: Mapping[str, Any], results: Path) -> tuple[Path, Path]:
    """``<stamp>.json`` and ``<stamp>.md`` under ``results``."""
    results.mkdir(parents=True, exist_ok=True)
    data, table = results / f"{doc['stamp']}.json", results / f"{doc['stamp']}.md"
    data.write_text(json.dumps(doc, indent=2) + "\n")
    table.write_text(markdown(doc))
    return data, table
