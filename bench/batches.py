"""One micro-batch as each system reports it, brought to one shape (pure functions).

Sluice: the driver's ``batch`` log event (``ts`` is logged right after the commit;
phases in seconds). Structured Streaming: a ``StreamingQueryProgress`` as JSON
(``timestamp`` is the trigger's start; ``durationMs`` per step, in milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from bench.stats import Span

SLUICE_PHASES: Final = ("read_s", "transform_s", "dead_letter_s", "write_s", "commit_s")
STRUCTURED_CHECKPOINT: Final = ("walCommit", "commitOffsets")
STRUCTURED_OTHER: Final = ("latestOffset", "getBatch", "queryPlanning", "addBatch")

SLUICE_COMMIT: Final = "commit"
SLUICE_PLAN: Final = "plan"
SLUICE_HISTORY: Final = "history"
STRUCTURED_COMMIT: Final = "commitOffsets"
STRUCTURED_WAL: Final = "walCommit"


@dataclass(frozen=True)
class BatchRecord:
    """A batch: its wall-clock span, its records, and named durations in seconds:
    ``checkpoint`` (what making the batch durable cost) and ``phases`` (the rest)."""

    started: float
    ended: float
    records: int
    checkpoint: Mapping[str, float] = field(default_factory=dict)
    phases: Mapping[str, float] = field(default_factory=dict)

    @property
    def span(self) -> Span:
        return Span(self.started, self.ended, self.records)

    @property
    def checkpoint_total(self) -> float:
        return sum(self.checkpoint.values())


def epoch_seconds(iso: str) -> float:
    """Seconds since the epoch of an ISO-8601 time with a zone (``Z`` or an offset)."""
    return datetime.fromisoformat(iso).timestamp()


def from_sluice(event: Mapping[str, Any]) -> BatchRecord | None:
    """A ``batch`` log event of the driver; ``None`` for any other event.

    Checkpoint cost: the commit LWT (``commit_lwt_s``), the batch-history row that
    follows it (the rest of ``commit_s``) and the write-ahead plan LWT (``plan_s``).
    Events of older drivers lack the first and last: then the commit is all of
    ``commit_s`` and the plan is what ``batch_s`` holds beyond the timed phases (an
    upper bound: it also holds the loop's bookkeeping between them)."""
    if event.get("event") != "batch":
        return None
    ended = epoch_seconds(str(event["ts"]))
    total = float(event["batch_s"])
    phases = {name.removesuffix("_s"): float(event.get(name, 0.0)) for name in SLUICE_PHASES}
    commit = phases.pop("commit")
    lwt = float(event.get("commit_lwt_s", commit))
    derived = max(0.0, total - commit - sum(phases.values()))
    plan = float(event.get("plan_s", derived))
    return BatchRecord(
        started=ended - total,
        ended=ended,
        records=int(event["records"]),
        checkpoint={SLUICE_COMMIT: lwt, SLUICE_HISTORY: commit - lwt, SLUICE_PLAN: plan},
        phases={**phases, "batch": total},
    )


def from_structured(progress: Mapping[str, Any]) -> BatchRecord | None:
    """A progress report of a trigger that ran a batch (it wrote the offset log);
    ``None`` for the reports of idle triggers."""
    durations: Mapping[str, Any] = progress.get("durationMs") or {}
    if STRUCTURED_WAL not in durations:
        return None
    started = epoch_seconds(str(progress["timestamp"]))
    total = float(durations.get("triggerExecution", 0)) / 1000.0
    return BatchRecord(
        started=started,
        ended=started + total,
        records=int(progress.get("numInputRows") or 0),
        checkpoint={k: float(durations.get(k, 0)) / 1000.0 for k in STRUCTURED_CHECKPOINT},
        phases={
            **{k: float(durations[k]) / 1000.0 for k in STRUCTURED_OTHER if k in durations},
            "batch": total,
        },
    )
