"""The soak's summary: the counters a user checks, recovery per kind of fault, and
throughput, as text; and whether the soak passed. Pure formatting and arithmetic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sluice_dev.soak import checks, recovery


@dataclass(frozen=True)
class Production:
    sequence_numbers: int
    committed: int
    aborted: int
    malformed_committed: int
    settled_unknown: int = 0
    ledger_mismatches: int = 0
    """Committed records a ``read_committed`` reader cannot see, plus aborted ones it
    can: the producer's bookkeeping disagreeing with Kafka (a harness problem)."""


@dataclass(frozen=True)
class Summary:
    production: Production
    chain: checks.Chain
    sink: checks.SinkCheck
    dead_letters: checks.DeadLetterCheck
    offsets_off: Mapping[int, str]
    recoveries: Sequence[recovery.Recovery]
    records_per_second: float | None
    notes: Sequence[str] = field(default_factory=tuple)
    standby: int = 0
    """The pipeline's hot standbys (with 1, spec changes were warm handovers)."""
    low_latency: bool = False
    """Whether the pipeline ran with ``trigger.mode: LowLatency``."""

    @property
    def counters(self) -> dict[str, int]:
        """Every counter that must be 0, by the name the summary prints."""
        return {
            "missing": self.sink.missing,
            "duplicates": self.chain.overlaps + self.sink.repeated,
            "aborted in sink": self.sink.aborted,
            "dlq missing": self.dead_letters.missing,
            "dlq wrong reason": self.dead_letters.wrong_reason,
            "aborted in dlq": self.dead_letters.aborted,
            "unexpected in sink": self.sink.unexpected,
            "unexpected in dlq": self.dead_letters.unexpected,
            "chain gaps": self.chain.gaps,
            "chain missing batch ids": self.chain.missing_ids,
            "partitions off last stable offset": len(self.offsets_off),
            "faults not recovered": sum(1 for r in self.recoveries if r.commit is None),
            "ledger mismatches": self.production.ledger_mismatches,
        }

    @property
    def passed(self) -> bool:
        return not any(self.counters.values())

    def lines(self) -> list[str]:
        made = self.production
        rate = self.records_per_second
        mode = (
            "standby 1, warm-handover upgrades"
            if self.standby
            else "no standby, clean-stop upgrades"
        )
        if self.low_latency:
            mode += ", trigger.mode LowLatency"
        lines = [
            f"mode: {mode}",
            f"sequence numbers produced: {made.sequence_numbers} (committed {made.committed}, "
            f"aborted {made.aborted}, malformed among committed {made.malformed_committed})",
            f"records in sink: {self.sink.rows}",
            f"dead letters: {self.dead_letters.letters} (repeats {self.dead_letters.repeats})",
            f"committed batches: {self.chain.batches}",
            f"records/s: {'n/a' if rate is None else f'{rate:.0f}'}"
            " (records of committed batches, first to last commit)",
            f"faults: {len(self.recoveries)}",
            *(f"  {stats.line()}" for stats in recovery.per_kind(self.recoveries)),
        ]
        lines += [f"offsets: partition {p}: {text}" for p, text in self.offsets_off.items()]
        lines += [f"note: {note}" for note in self.notes]
        lines += [f"{name}: {value}" for name, value in self.counters.items()]
        lines.append("soak: PASSED" if self.passed else "soak: FAILED")
        return lines


def records_per_second(commits: Sequence[recovery.Commit]) -> float | None:
    """Records of committed batches per second, from the first commit to the last."""
    if len(commits) < 2:
        return None
    ordered = sorted(commits, key=lambda c: c.at)
    seconds = ordered[-1].at - ordered[0].at
    return sum(c.records for c in ordered[1:]) / seconds if seconds > 0 else None


def compare(summaries: Sequence[Summary]) -> list[str]:
    """Fault -> next commit per kind of fault, one column per soak (its mode): p50 / max
    and the load average's p50 during those faults."""
    columns = [
        ({s.kind: s for s in recovery.per_kind(summary.recoveries)}, summary)
        for summary in summaries
    ]
    kinds = list(dict.fromkeys(k for by_kind, _ in columns for k in by_kind))
    head = f"{'fault -> next commit':<22}" + "".join(
        f"{f'standby {summary.standby}: p50 / max (load)':<36}" for _, summary in columns
    )
    lines = [head.rstrip()]
    for kind in kinds:
        cells = []
        for by_kind, _ in columns:
            stats = by_kind.get(kind)
            cells.append("-" if stats is None else _cell(stats))
        lines.append((f"{kind.value:<22}" + "".join(f"{c:<36}" for c in cells)).rstrip())
    return lines


def _cell(stats: recovery.KindStats) -> str:
    if stats.p50 is None or stats.max is None:
        return f"not recovered ({stats.count})"
    text = f"{stats.p50:.1f} s / {stats.max:.1f} s"
    if stats.recovered < stats.count:
        text += f", {stats.count - stats.recovered} not recovered"
    if stats.load_p50 is not None:
        text += f" ({stats.load_p50:.1f})"
    return text
