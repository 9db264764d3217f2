"""Figures of ``bench.state``: a contender's drain of the same backlog, from its
driver's ``batch`` log events, and the table that sets the stateful contenders beside
the stateless one (pure functions)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.batches import epoch_seconds
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
    state_read_p50_s: float | None = None
    state_read_p99_s: float | None = None
    """Per batch, seconds of its requests reading state, summed over its tasks
    (``state_read_s`` of the batch's log line); ``None``: no state (a stateless or a
    Structured Streaming contender)."""
    keys_read_p50: float | None = None

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
        *_state_reads(steady),
    )


def _state_reads(batches: Sequence[Event]) -> tuple[float | None, float | None, float | None]:
    """p50 and p99 of the batches' state-read seconds, and their keys read (p50)."""
    reads = [float(b["state_read_s"]) for b in batches if "state_read_s" in b]
    if not reads:
        return None, None, None
    keys = statistics.median(int(b["state_keys_read"]) for b in batches if "state_read_s" in b)
    return statistics.median(reads), percentile(reads, 99), float(keys)


@dataclass(frozen=True)
class Steady:
    """One Sluice contender fed ``rate`` events/s live (1 s trigger): its batches that
    ended in the measured window (after the warm-up, before producing ended)."""

    contender: str
    rate: float
    """Events/s produced, as measured."""
    committed_per_s: float
    """Records of the window's batches per second of the window."""
    batches: int
    batch_p50_s: float | None
    batch_p99_s: float | None
    """``None`` (with the state's figures): no batch committed in the window."""
    state_read_p50_s: float | None
    state_read_p99_s: float | None
    keys_read_p50: float | None
    state_write_p50_s: float | None
    behind_s: float
    """How far behind the contender was when producing ended, in seconds of events."""
    sustained: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def steady(
    contender: str,
    events: Sequence[Event],
    *,
    window: tuple[float, float],
    rate: float,
    behind_s: float,
    sustained: bool,
) -> Steady:
    """The figures of ``contender``'s batches whose commit fell in ``window`` (epoch
    seconds, from its driver's log events)."""
    began, ended = window
    batches = [
        e
        for e in events
        if e.get("event") == "batch"
        and e.get("records")
        and began <= epoch_seconds(str(e["ts"])) <= ended
    ]
    if not batches:  # its first batch (the JVM's warm-up) outlasted the window
        return Steady(contender, rate, 0.0, 0, None, None, None, None, None, None, behind_s, False)
    seconds = [float(b["batch_s"]) for b in batches]
    read_p50, read_p99, keys = _state_reads(batches)
    writes = [float(b["state_write_s"]) for b in batches if "state_write_s" in b]
    return Steady(
        contender,
        rate,
        sum(int(b["records"]) for b in batches) / (ended - began),
        len(batches),
        statistics.median(seconds),
        percentile(seconds, 99),
        read_p50,
        read_p99,
        keys,
        statistics.median(writes) if writes else None,
        behind_s,
        sustained,
    )


def steady_summary(runs: Sequence[Sequence[Steady]]) -> list[dict[str, Any]]:
    """Per contender, medians over the runs (``None`` figures stay ``None``), and the
    runs it kept up in."""
    by_name: dict[str, list[Steady]] = {}
    for run in runs:
        for fed in run:
            by_name.setdefault(fed.contender, []).append(fed)
    rows = []
    for name, found in by_name.items():
        row: dict[str, Any] = {"contender": name}
        row.update(
            _medians(
                found,
                (
                    "rate",
                    "committed_per_s",
                    "batch_p50_s",
                    "batch_p99_s",
                    "state_read_p50_s",
                    "state_read_p99_s",
                    "keys_read_p50",
                    "state_write_p50_s",
                    "behind_s",
                ),
            )
        )
        row["sustained_runs"] = sum(f.sustained for f in found)
        row["runs"] = len(found)
        rows.append(row)
    return rows


def summary(runs: Sequence[Sequence[Drain]]) -> list[dict[str, Any]]:
    """Per contender, medians over the runs, and its rate as a share of the first
    contender's (the stateless baseline) in the same runs."""
    by_name: dict[str, list[Drain]] = {}
    for run in runs:
        for drained in run:
            by_name.setdefault(drained.contender, []).append(drained)
    if not by_name:  # the live half only
        return []
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
                **_medians(found, ("state_read_p50_s", "state_read_p99_s", "keys_read_p50")),
                "exact_runs": sum(d.exact for d in found),
                "runs": len(found),
            }
        )
    return rows


def _medians(found: Sequence[Drain | Steady], names: Sequence[str]) -> dict[str, float | None]:
    """Per figure of ``names``, its median over ``found``, rounded; ``None`` figures
    are left out, and a figure that is ``None`` in every run stays ``None``."""
    figures = {}
    for name in names:
        known = [v for v in (getattr(d, name) for d in found) if v is not None]
        figures[name] = round(statistics.median(known), 3) if known else None
    return figures


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def markdown(
    rows: Sequence[Mapping[str, Any]],
    records: int,
    per_batch: int,
    steady_rows: Sequence[Mapping[str, Any]] = (),
) -> str:
    lines = [
        f"# The cost of state: one backlog of {records:,} records, batches of "
        f"{per_batch:,}, medians of runs",
        "",
        "| contender | records/s | of stateless | batch p50 s | batch p99 s | write p50 s "
        "| state read p50 s | state read p99 s | keys read per batch | exact |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['contender']} | {r['records_per_s']:,.0f} | {r['of_stateless']:.2f} "
            f"| {r['batch_p50_s']:.2f} | {r['batch_p99_s']:.2f} | {r['write_p50_s']:.2f} "
            f"| {_seconds(r.get('state_read_p50_s'))} | {_seconds(r.get('state_read_p99_s'))} "
            f"| {_count(r.get('keys_read_p50'))} | {r['exact_runs']}/{r['runs']} |"
        )
    if any(str(r["contender"]).startswith("ss-") for r in rows):
        lines += [
            "",
            "ss-dedup and ss-visitors: Structured Streaming on the same topic and tables "
            "(dropDuplicatesWithinWatermark; approx_count_distinct per window, which is not "
            "exact by design), its state in the query's checkpoint; batches of the same size.",
        ]
    lines += [
        "",
        "State read: per batch, the seconds of its requests reading state (lookups, the "
        "versions a write replaces, the open-windows index), summed over its Spark tasks, "
        "which run two at a time here; keys read counts each of those reads.",
    ]
    if steady_rows:
        lines += _steady_markdown(steady_rows)
    return "\n".join(lines) + "\n"


def _steady_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "",
        f"## Live: {rows[0]['rate']:,.0f} events/s, 1 s trigger, medians of runs",
        "",
        "| contender | committed/s | batch p50 s | batch p99 s | state read p50 s "
        "| state read p99 s | keys read per batch | state write p50 s | behind at end s "
        "| kept up |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['contender']} | {r['committed_per_s']:,.0f} | {_seconds(r['batch_p50_s'])} "
            f"| {_seconds(r['batch_p99_s'])} | {_seconds(r['state_read_p50_s'])} "
            f"| {_seconds(r['state_read_p99_s'])} | {_count(r['keys_read_p50'])} "
            f"| {_seconds(r['state_write_p50_s'])} | {r['behind_s']:,.1f} "
            f"| {r['sustained_runs']}/{r['runs']} |"
        )
    lines += [
        "",
        "Committed/s: records of the batches committed in the measured window (after the "
        "warm-up, until producing ended) per second. Kept up: no more than five trigger "
        "intervals' worth of events behind when producing ended (bench.pacing).",
    ]
    return lines
