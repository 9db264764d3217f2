"""Made-up outcomes of a benchmark run (``bench.run.Outcome``), for the tests of its
results document, table and summary: two contenders, both latency phases, a ceiling."""

from __future__ import annotations

from pathlib import Path

from bench.batches import BatchRecord
from bench.ceiling import CeilingRun, Plan, Written
from bench.contenders import System
from bench.fixtures import Names
from bench.live import Produced
from bench.pacing import Pacing
from bench.run import SUSTAINABLE, TARGET, LatencyRun, Outcome, ThroughputRun


def batch(start: float, records: int, checkpoint: dict[str, float]) -> BatchRecord:
    return BatchRecord(start, start + 1.0, records, checkpoint, {"batch": 1.0})


def latency(latencies: list[float], rate: float, lag: int, missing: int = 0) -> LatencyRun:
    """A latency phase that ended ``lag`` events behind (allowance: 5 s' worth)."""
    paced = Pacing(rate, 10_000, 10_000 - lag, 5 * rate, missing)
    return LatencyRun([], latencies, Produced(100, 3, 1.0), missing, 10, 0, 1.0, paced)


def outcome(*, sluice_rate: float = 500.0, structured_lag: int = 0) -> Outcome:
    """Sluice drains 1,000 records in 2 s, Structured Streaming in 4 s; the ceiling
    writes 1,000 rows in 1 s; at the target rate Structured Streaming ends
    ``structured_lag`` events behind."""
    result = Outcome(Names("20261122T050000Z", "run"), Path("/tmp/logs"), backlog_seconds=3.0)
    sluice = {"commit": 0.004, "plan": 0.005}
    structured = {"walCommit": 0.02, "commitOffsets": 0.015}
    per_batch = int(sluice_rate)
    result.throughput = {
        System.SLUICE: ThroughputRun([batch(t, per_batch, sluice) for t in (0, 1)], 30.0, 1000),
        System.STRUCTURED: ThroughputRun(
            [batch(t, 250, structured) for t in (0, 1, 2, 3)], 35.0, 1000
        ),
    }
    result.rates = {SUSTAINABLE: 170.0, TARGET: 5000.0}
    result.latency = {
        SUSTAINABLE: {
            System.SLUICE: latency([0.9, 1.0, 1.1], 170.0, 0),
            System.STRUCTURED: latency([1.2, 1.3], 170.0, 0),
        },
        TARGET: {
            System.SLUICE: latency([1.0, 1.2, 1.4], 5000.0, 0),
            System.STRUCTURED: latency([1.5, 1.7], 5000.0, structured_lag, missing=1),
        },
    }
    written = [Written(100.0, 100.5, 600, 12, 0), Written(100.2, 101.0, 400, 8, 1)]
    result.ceiling = CeilingRun(Plan(1000, 2), written, 1000)
    return result
