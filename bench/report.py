"""The results of one run as one JSON document (pure functions of the outcome).

Ratios are Sluice over Structured Streaming, and shares of the ceiling are a
contender's records/s over the ceiling's rows/s, all measured in the same run. The
document's figure sections (``systems``, ``ceiling``, ``fraction_of_ceiling``,
``comparison``, ``targets``) have the same shape in the summary of several runs
(``bench.summary``), where they hold medians; ``bench.markdown`` renders either.
"""

from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from bench import ceiling, kill
from bench.batches import (
    SLUICE_COMMIT,
    STRUCTURED_COMMIT,
    BatchRecord,
)
from bench.contenders import TRANSFORM, System
from bench.run import PHASES, TARGET, LatencyRun, Outcome, ThroughputRun
from bench.settings import Settings
from bench.stats import Summary, ratio, window
from sluice_dev import versions

SCHEMA_VERSION: Final = 2
WRITER: Final = {
    System.SLUICE: "its own sink, sluice_job.sinks.cassandra.CassandraSink.write",
    System.LOW_LATENCY: (
        "its own sink, sluice_job.sinks.cassandra.CassandraSink.write; trigger.mode "
        "LowLatency: the next batch when the last commits, a small batch in one task"
    ),
    System.STRUCTURED: (
        "user-written, bench.baseline_writer: frame.rdd.foreachPartition over Rows, one "
        "prepared INSERT ... USING TIMESTAMP per row, execute_concurrent_with_args with "
        "concurrency 64, a session per Python worker; its Kafka reads keep the "
        "connector's defaults (fetch.max.wait.ms 500 ms), as a user's job would"
    ),
    System.REALTIME: (
        "user-written, bench.realtime_job.CassandraRows: a ForeachWriter (Real-Time Mode's "
        "one arbitrary sink), each row sent as it arrives with one prepared INSERT ... "
        "USING TIMESTAMP, at most 64 in flight per task, a session per Python worker"
    ),
}
WRITER_SHORT: Final = {
    System.SLUICE: "its CassandraSink",
    System.LOW_LATENCY: "its CassandraSink, one task per small batch",
    System.STRUCTURED: "user-written: 1 INSERT per row, 64 in flight",
    System.REALTIME: "user-written ForeachWriter: 1 INSERT per row as it comes, 64 in flight",
}
COMMIT_KEY: Final = {
    System.SLUICE: SLUICE_COMMIT,
    System.LOW_LATENCY: SLUICE_COMMIT,
    System.STRUCTURED: STRUCTURED_COMMIT,
    System.REALTIME: STRUCTURED_COMMIT,
}
COMMIT_WHAT: Final = {
    System.SLUICE: "commit_lwt_s: the commit LWT",
    System.LOW_LATENCY: "commit_lwt_s: the commit LWT",
    System.STRUCTURED: "durationMs.commitOffsets: commit-log write",
    System.REALTIME: "durationMs.commitOffsets: commit-log write",
}
CHECKPOINT_WHAT: Final = {
    System.SLUICE: "plan LWT (plan_s) + commit LWT + batch-history INSERT (commit_s)",
    System.LOW_LATENCY: "plan LWT (plan_s) + commit LWT + batch-history INSERT (commit_s)",
    System.STRUCTURED: "durationMs.walCommit + durationMs.commitOffsets",
    System.REALTIME: "durationMs.walCommit + durationMs.commitOffsets",
}
TARGETS: Final = {
    "throughput_ratio_min": 2.0,
    "throughput_ceiling_share_min": 0.6,
    "latency_p99_ms_max": 3000.0,
    "commit_p99_ms_max": 20.0,
    "checkpoint_p99_ratio_max": 0.2,
}
"""The issue's targets: Sluice's throughput >= 2 x Structured Streaming's and >= 60 %
of the ceiling; its end-to-end latency p99 at the target rate (5,000 events/s, 1 s
trigger) <= Structured Streaming's and <= 3 s; its commit p99 <= 20 ms; its
checkpoint p99 <= 1/5 of Structured Streaming's."""

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
    "latency_rates": (
        "sustainable: sustained_share of the slower contender's backlog records/s, "
        "rounded down to two significant digits (skipped when not below rate); "
        "target: rate"
    ),
    "sustained": (
        "a latency phase is not sustained by a contender when, as the last event was "
        "handed to the producer, the events produced (priming included) exceeded the "
        "records of its batches ended by then by more than behind_triggers trigger "
        "intervals (at least 1 s each) at the phase's rate, or when probes were still "
        "not visible after drain_timeout; its latency figures are then kept in the JSON "
        "(sustained: false) but never shown as a latency"
    ),
    "ceiling": (
        "a standalone client (bench.ceiling), alone: the backlog's rows generated in "
        "memory, ceiling.processes processes, token-aware UNLOGGED batches of rows "
        "sharing a replica set (<= batch_rows_max rows, <= batch_bytes_max bytes as "
        "the sink estimates them: serialized values plus a cell timestamp each), "
        "concurrency_per_process requests in flight, USING "
        "TIMESTAMP; rows / (last acknowledgement - first write), rows counted after"
    ),
    "fraction_of_ceiling": "a contender's backlog records/s over the ceiling's rows/s",
    "kill": (
        "kill_rate events/s for kill_seconds on a fresh topic and table; kill_after "
        "seconds in, the contender's process group is SIGKILLed and started again on "
        "the same checkpoint as epoch 2; missing: produced events without a row; "
        "duplicates: rows beyond the first per event; rewritten: rows visible before "
        "the restart whose write version now carries epoch 2 (bench.kill)"
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
    """A latency phase's figures, flagged ``sustained: false`` when the contender fell
    behind (``bench.pacing``)."""
    if run is None:
        return None
    paced = run.pacing
    return {
        "rate": paced.rate,
        "sustained": paced.sustained,
        "not_sustained_because": paced.why_not,
        "pacing": {
            "produced": paced.produced,
            "processed_by_end_of_producing": paced.processed,
            "lag_events": paced.lag,
            "lag_seconds": round(paced.lag_seconds, 2),
            "allowed_lag_events": round(paced.allowed),
            "allowed_lag_seconds": round(paced.allowed / paced.rate, 2) if paced.rate else None,
        },
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


def _latency_runs(outcome: Outcome, system: System) -> dict[str, LatencyRun]:
    return {
        phase: runs[system]
        for phase in PHASES
        if system in (runs := outcome.latency.get(phase, {}))
    }


def system_results(outcome: Outcome, system: System) -> dict[str, Any]:
    throughput, latency = outcome.throughput.get(system), _latency_runs(outcome, system)
    return {
        "title": system.display,
        "writer": WRITER[system],
        "throughput": throughput_results(throughput),
        "checkpoint": checkpoint_results(system, _busy(throughput, *latency.values())),
        "latency": {phase: latency_results(run) for phase, run in latency.items()},
        "kill": kill.results(outcome.kill.get(system)),
    }


def samples(outcome: Outcome, system: System) -> dict[str, Any]:
    throughput, latency = outcome.throughput.get(system), _latency_runs(outcome, system)
    batches = _busy(throughput, *latency.values())
    return {
        "latency_ms": {phase: _ms(run.latencies) for phase, run in latency.items()},
        "commit_ms": _ms([b.checkpoint[COMMIT_KEY[system]] for b in batches]),
        "checkpoint_ms": _ms([b.checkpoint_total for b in batches]),
    }


def get(doc: Mapping[str, Any] | None, *path: str) -> Any:
    value: Any = doc
    for key in path:
        if not isinstance(value, Mapping) or value.get(key) is None:
            return None
        value = value[key]
    return value


def latency_comparison(s: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any]:
    """Latency ratios of one phase, only when both contenders sustained it."""
    if not (get(s, "sustained") and get(b, "sustained")):
        return {"p50": None, "p99": None}
    return {
        "p50": ratio(get(s, "p50_ms"), get(b, "p50_ms")),
        "p99": ratio(get(s, "p99_ms"), get(b, "p99_ms")),
    }


def comparison(systems: Mapping[str, Any]) -> dict[str, Any]:
    s, b = systems[System.SLUICE.value], systems[System.STRUCTURED.value]
    phases = [p for p in PHASES if p in (s.get("latency") or {}) or p in (b.get("latency") or {})]
    return {
        "throughput": ratio(
            get(s, "throughput", "records_per_second"), get(b, "throughput", "records_per_second")
        ),
        "throughput_steady": ratio(
            get(s, "throughput", "steady_records_per_second"),
            get(b, "throughput", "steady_records_per_second"),
        ),
        "commit_p99": ratio(
            get(s, "checkpoint", "commit", "p99_ms"), get(b, "checkpoint", "commit", "p99_ms")
        ),
        "sluice_commit_p99_over_structured_checkpoint_p99": ratio(
            get(s, "checkpoint", "commit", "p99_ms"), get(b, "checkpoint", "total", "p99_ms")
        ),
        "checkpoint_p99": ratio(
            get(s, "checkpoint", "total", "p99_ms"), get(b, "checkpoint", "total", "p99_ms")
        ),
        "latency": {
            phase: latency_comparison(get(s, "latency", phase), get(b, "latency", phase))
            for phase in phases
        },
    }


def fraction_of_ceiling(
    systems: Mapping[str, Any], found: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Each contender's backlog records/s over the ceiling's rows/s (those that ran)."""
    top = get(found, "records_per_second")
    shares = {
        system.value: ratio(get(systems, system.value, "throughput", "records_per_second"), top)
        for system in System
    }
    return {
        name: share
        for name, share in shares.items()
        if share is not None or name in (System.SLUICE.value, System.STRUCTURED.value)
    }


def ran(systems: Mapping[str, Any]) -> list[System]:
    """The contenders with figures in ``systems`` (a run's or the medians), in
    :class:`System`'s order: Sluice, Structured Streaming, Real-Time Mode."""
    return [
        system
        for system in System
        if get(systems, system.value, "throughput") is not None
        or get(systems, system.value, "latency")
    ]


def _at_most(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def _at_least(value: float | None, limit: float) -> bool | None:
    return None if value is None else value >= limit


def latency_target(doc: Mapping[str, Any]) -> dict[str, bool | None]:
    """Sluice's p99 at the target rate against Structured Streaming's and 3 s. Not met
    when Sluice fell behind; met against Structured Streaming when only the baseline
    fell behind (its latency then grows without bound); unknown without the phase."""
    s = get(doc, "systems", System.SLUICE.value, "latency", TARGET)
    b = get(doc, "systems", System.STRUCTURED.value, "latency", TARGET)
    if s is None:
        return {"latency_p99_max_met": None, "latency_p99_vs_structured_met": None}
    if not s.get("sustained"):
        return {"latency_p99_max_met": False, "latency_p99_vs_structured_met": False}
    p99 = get(s, "p99_ms")
    versus: bool | None
    if b is None:
        versus = None
    elif not b.get("sustained"):
        versus = True
    else:
        other = get(b, "p99_ms")
        versus = None if p99 is None or other is None else p99 <= other
    return {
        "latency_p99_max_met": _at_most(p99, TARGETS["latency_p99_ms_max"]),
        "latency_p99_vs_structured_met": versus,
    }


def targets(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's targets (:data:`TARGETS`), as figures (never asserted), from a
    document holding ``systems``, ``comparison`` and ``fraction_of_ceiling``."""
    compared = doc["comparison"]
    return {
        **TARGETS,
        "throughput_met": _at_least(compared.get("throughput"), TARGETS["throughput_ratio_min"]),
        "throughput_ceiling_met": _at_least(
            get(doc, "fraction_of_ceiling", System.SLUICE.value),
            TARGETS["throughput_ceiling_share_min"],
        ),
        **latency_target(doc),
        "commit_p99_met": _at_most(
            get(doc, "systems", System.SLUICE.value, "checkpoint", "commit", "p99_ms"),
            TARGETS["commit_p99_ms_max"],
        ),
        "checkpoint_p99_met": _at_most(
            compared.get("checkpoint_p99"), TARGETS["checkpoint_p99_ratio_max"]
        ),
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
    top = ceiling.results(outcome.ceiling)
    doc: dict[str, Any] = {
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
            "writer": {s.value: WRITER[s] for s in System},
            "sluice_max_records_per_partition": settings.cap,
            "structured_max_offsets_per_trigger": settings.cap * settings.partitions,
            "backlog_produce_seconds": round(outcome.backlog_seconds, 2),
        },
        "rates": dict(outcome.rates),
        "systems": systems,
        "ceiling": top,
        "fraction_of_ceiling": fraction_of_ceiling(systems, top),
        "comparison": comparison(systems),
    }
    return {
        **doc,
        "targets": targets(doc),
        "method": METHOD,
        "samples": {s.value: samples(outcome, s) for s in System},
        "logs": str(outcome.logs),
    }
