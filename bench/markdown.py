"""The Markdown table of a run's results document, or of the summary of several runs
(same shape, medians): pure functions from the document to text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from bench.contenders import System
from bench.report import CHECKPOINT_WHAT, COMMIT_WHAT, WRITER, WRITER_SHORT, get, ran
from bench.run import PHASES, TARGET
from bench.settings import Settings


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def _pair(summary: Mapping[str, Any] | None, digits: int = 1, *, with_p95: bool = False) -> str:
    """p50 / p99 (``with_p95``: p50 / p95 / p99, or p50 / p99 for results written
    before p95 was measured); ``-`` without samples."""
    if not summary or not summary.get("n"):
        return "-"
    p95 = ("p95_ms",) if with_p95 and summary.get("p95_ms") is not None else ()
    return " / ".join(_num(summary[name], digits) for name in ("p50_ms", *p95, "p99_ms"))


def behind(found: Mapping[str, Any]) -> str:
    """Why a phase was not sustained, from its figures (a run's or the medians)."""
    reasons = []
    lag, allowed = get(found, "pacing", "lag_events"), get(found, "pacing", "allowed_lag_events")
    if lag is not None and allowed is not None and lag > allowed:
        reasons.append(f"{_num(get(found, 'pacing', 'lag_seconds'), 1)} s behind")
    if found.get("probes_missing"):
        reasons.append(f"{found['probes_missing']:,.0f} probes never seen")
    return ", ".join(reasons) or "fell behind"


def latency_cell(found: Mapping[str, Any] | None) -> str:
    """p50 / p95 / p99 of a sustained phase; a phase not sustained shows no latency.
    In a summary, how many runs disagreed with the verdict."""
    if not found:
        return "-"
    runs, kept = int(found.get("runs") or 0), int(found.get("sustained_runs") or 0)
    mixed = 0 < kept < runs
    if not found.get("sustained"):
        of_runs = f" in {runs - kept} of {runs} runs" if mixed else ""
        return f"not sustained{of_runs} ({behind(found)})"
    shown = _pair(found, 0, with_p95=True)
    return shown + (f" (sustained in {kept} of {runs} runs)" if mixed else "")


def pace_cell(found: Mapping[str, Any] | None) -> str:
    """Produce rate, probes seen / missing, how far behind at the end of producing."""
    if not found:
        return "-"
    return (
        f"{_num(found.get('produce_rate'))}/s; {_num(found.get('n'))} / "
        f"{_num(found.get('probes_missing'))}; {_num(get(found, 'pacing', 'lag_seconds'), 1)} s"
    )


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def columns(doc: Mapping[str, Any]) -> list[System]:
    """The contenders shown: those that ran, Sluice and Structured Streaming always."""
    shown = ran(doc["systems"])
    return [s for s in System if s in shown or s in (System.SLUICE, System.STRUCTURED)]


def table_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    shown = columns(doc)
    found = {s: doc["systems"].get(s.value) for s in shown}
    c, shares = doc["comparison"], doc.get("fraction_of_ceiling") or {}
    top = get(doc, "ceiling", "records_per_second")

    def each(*path: str, digits: int = 0) -> list[str]:
        return [_num(get(found[s], *path), digits) for s in shown]

    def cells(render: Callable[[Any], str], *path: str) -> list[str]:
        return [render(get(found[s], *path)) for s in shown]

    rows = [
        ["Cassandra writer", *(WRITER_SHORT[s] for s in shown), ""],
        [
            "throughput, backlog (records/s)",
            *each("throughput", "records_per_second"),
            _num(get(c, "throughput"), 2),
        ],
        [
            f"share of the ceiling ({_num(top)} rows/s)",
            *(_percent(shares.get(s.value)) for s in shown),
            "",
        ],
        [
            "throughput without 1st batch (records/s)",
            *each("throughput", "steady_records_per_second"),
            _num(get(c, "throughput_steady"), 2),
        ],
        ["backlog batches", *each("throughput", "batches"), ""],
        ["process start to backlog done (s)", *each("throughput", "process_seconds", digits=1), ""],
        [
            "commit per batch p50 / p99 (ms)",
            *cells(_pair, "checkpoint", "commit"),
            _num(get(c, "commit_p99"), 2),
        ],
        [
            "checkpoint per batch p50 / p99 (ms)",
            *cells(_pair, "checkpoint", "total"),
            _num(get(c, "checkpoint_p99"), 2),
        ],
        ["batches measured for checkpoint cost", *each("checkpoint", "batches"), ""],
    ]
    for phase in PHASES:
        phases = [get(found[s], "latency", phase) for s in shown]
        if all(p is None for p in phases):
            continue
        rate = get(doc, "rates", phase) or next(
            (get(p, "rate") for p in phases if p is not None), None
        )
        rows += [
            [
                f"latency p50 / p95 / p99 at {_num(rate)} events/s, {phase} (ms)",
                *(latency_cell(p) for p in phases),
                _num(get(c, "latency", phase, "p99"), 2),
            ],
            [
                f"at {_num(rate)}/s: produced; probes seen / missing; behind at end",
                *(pace_cell(p) for p in phases),
                "",
            ],
        ]
    rows += kill_rows(doc, shown, found)
    return rows


def kill_cell(found: Mapping[str, Any] | None) -> str:
    """Missing / duplicates / re-written of ``written`` after a SIGKILL mid-run."""
    if not found:
        return "-"
    return (
        f"{_num(found.get('missing'))} / {_num(found.get('duplicates'))} / "
        f"{_num(found.get('rewritten'))} of {_num(found.get('written_before_restart'))}"
    )


def kill_rows(
    doc: Mapping[str, Any], shown: Sequence[System], found: Mapping[System, Any]
) -> list[list[str]]:
    runs = [get(found[s], "kill") for s in shown]
    if all(r is None for r in runs):
        return []
    p = doc["parameters"]
    return [
        [
            f"SIGKILLed {_num(p.get('kill_after'))} s into {_num(p.get('kill_rate'))} events/s: "
            "missing / duplicates / rows re-written",
            *(kill_cell(r) for r in runs),
            "",
        ],
        [
            "after the kill: restarted; all rows in (s)",
            *(
                f"{_num(get(r, 'restart_ready_seconds'), 1)}; "
                f"{_num(get(r, 'caught_up_seconds'), 1)}"
                if r
                else "-"
                for r in runs
            ),
            "",
        ],
    ]


def table(doc: Mapping[str, Any]) -> list[str]:
    """The comparison table's lines: one column per contender shown, then the ratio."""
    shown = columns(doc)
    return [
        _row(["metric", *(s.display for s in shown), "Sluice / SS"]),
        _row(["---", *("---:" for _ in shown), "---:"]),
        *(_row(r) for r in table_rows(doc)),
    ]


def description(doc: Mapping[str, Any]) -> list[str]:
    """The paragraphs under the title: workload, writers, ceiling, phases, definitions."""
    p, w, m = doc["parameters"], doc["workload"], doc["machine"]
    top = doc.get("ceiling") or {}
    rates = ", ".join(f"{phase} {_num(rate)}" for phase, rate in (doc.get("rates") or {}).items())
    sink_rows, sink_bytes = p.get("sink_batch_rows") or 0, p.get("sink_batch_bytes") or 0
    writers = "; ".join(f"{s.display}: {WRITER[s]}" for s in columns(doc))
    sink_line = (
        f" Sluice's sink batches: batchRows {sink_rows or 'default'}, batchBytes "
        f"{sink_bytes or 'default'}."
        if sink_rows or sink_bytes
        else ""
    )
    ceiling_line = (
        f"Ceiling: a standalone client alone writes {_num(top.get('rows'))} rows of the "
        f"same table shape in {_num(top.get('seconds'), 1)} s = "
        f"{_num(top.get('records_per_second'))} rows/s ({_num(top.get('processes'))} processes "
        f"x {_num(top.get('concurrency_per_process'))} in flight, token-aware UNLOGGED batches "
        f"of <= {_num(top.get('batch_rows_max'))} rows / {_num(top.get('batch_bytes_max'))} "
        "estimated bytes, "
        f"the sink's grouping; rows counted afterwards: {_num(top.get('rows_in_table'))})."
        if top
        else "Ceiling: not measured."
    )
    return [
        f"{w['events']:,} JSON events on {w['partitions']} partitions; transform "
        f"`{w['transform']}`. Writers: {writers}. Cap {w['sluice_max_records_per_partition']:,}"
        f" records/partition/batch (Structured Streaming `maxOffsetsPerTrigger` "
        f"{w['structured_max_offsets_per_trigger']:,}). Spark {m['spark']} local[2] for all; "
        f"{m['cpus']} CPUs, load average before {m['load_average_before'][0]}, after "
        f"{m['load_average'][0]}.{sink_line}",
        "",
        ceiling_line,
        "",
        f"Latency (events/s: {rates}): {p['trigger_seconds']:g} s trigger, "
        f"{p['latency_seconds']:g} s measured after {p['warmup_seconds']:g} s warm-up, polled "
        f"every {p['poll_interval'] * 1000:g} ms. The sustainable rate is "
        f"{p['sustained_share']:g} x the slower of Sluice's and Structured Streaming's backlog "
        f"records/s, rounded down. *Not sustained*: at the end of producing, more than "
        f"{p['behind_triggers']:g} trigger intervals' worth of events not yet in a finished "
        "batch (Real-Time Mode: plus one batch duration, "
        f"{p.get('realtime_checkpoint_seconds', 5.0):g} s), or probes never seen in "
        f"Cassandra {p['drain_timeout']:g} s later; no latency is shown then.",
    ]


def markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"## {versus(doc)} ({doc['label']} run, {doc['stamp']})", ""]
    lines += smoke_warning(doc["parameters"], doc["label"])
    lines += [*description(doc), "", *table(doc), "", *footnotes(doc)]
    return "\n".join(lines) + "\n"


def versus(doc: Mapping[str, Any]) -> str:
    """The title's contenders: Sluice against the Spark queries that ran."""
    spark = [s.display for s in columns(doc) if s is not System.SLUICE]
    return f"Sluice vs Spark {' and '.join(spark)}"


NOT_FIGURES: Final = frozenset({"runs", "verify", "keep", "label", "results", "order"})
"""Settings that do not change what a run's figures measure: a run that differs from
the full run's defaults only in these is a full run (one run, some contenders, a
label of its own)."""


def reduced(parameters: Mapping[str, Any]) -> list[str]:
    """The parameters of a run that differ from a full run's (``Settings()``), each
    with both values: e.g. ``events 100,000 (full run: 1,000,000)``."""
    full = Settings().public()
    return [
        f"{name.replace('_', ' ')} {_value(value)} (full run: {_value(full[name])})"
        for name, value in parameters.items()
        if name in full and name not in NOT_FIGURES and value != full[name]
    ]


def _value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def smoke_warning(parameters: Mapping[str, Any], label: str) -> list[str]:
    """A warning above the table of a run whose parameters are not the full run's."""
    differ = reduced(parameters)
    if not differ:
        return []
    return [
        f"> **{label.upper()} RUN**: reduced parameters ({', '.join(differ)}), figures "
        "prove the benchmark works end to end; they are not representative.",
        "",
    ]


def footnotes(doc: Mapping[str, Any]) -> list[str]:
    shown = columns(doc)
    return [
        "Commit: "
        + "; ".join(f"{s.display} {COMMIT_WHAT[s]}" for s in shown)
        + ". Checkpoint: "
        + "; ".join(f"{s.display} {CHECKPOINT_WHAT[s]}" for s in shown)
        + ".",
        "",
        targets_line(doc),
    ]


def targets_line(doc: Mapping[str, Any]) -> str:
    t, c = doc["targets"], doc["comparison"]

    def verdict(met: bool | None) -> str:
        return "n/a" if met is None else ("met" if met else "MISSED")

    target_rate = _num(get(doc, "rates", TARGET))
    sluice = get(doc, "systems", System.SLUICE.value)
    p99 = get(sluice, "latency", TARGET, "p99_ms")
    shown = _num(p99) + " ms" if get(sluice, "latency", TARGET, "sustained") else "not sustained"
    return (
        f"Targets (reported, never asserted): throughput >= {t['throughput_ratio_min']:g} x SS: "
        f"{verdict(t['throughput_met'])} ({_num(c['throughput'], 2)}); "
        f">= {_percent(t['throughput_ceiling_share_min'])} of the ceiling: "
        f"{verdict(t['throughput_ceiling_met'])} "
        f"({_percent(get(doc, 'fraction_of_ceiling', System.SLUICE.value))}); "
        f"latency p99 at {target_rate} events/s <= SS's: "
        f"{verdict(t['latency_p99_vs_structured_met'])} and <= "
        f"{t['latency_p99_ms_max'] / 1000:g} s: {verdict(t['latency_p99_max_met'])} ({shown}); "
        f"commit p99 <= {t['commit_p99_ms_max']:g} ms: {verdict(t['commit_p99_met'])} "
        f"({_num(get(sluice, 'checkpoint', 'commit', 'p99_ms'), 1)} ms); "
        f"checkpoint p99 <= {t['checkpoint_p99_ratio_max']:g} x SS's: "
        f"{verdict(t['checkpoint_p99_met'])} ({_num(c['checkpoint_p99'], 2)})."
    )
