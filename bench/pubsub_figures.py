"""The figures of ``python -m bench.pubsub`` from what the driver logged (pure).

Per run: the driver's pull -> acknowledge throughput (messages of the batches after
the first, whose JVM warm-up is not the source's cost, over the time from the first
batch's acknowledgement to the last one's), the same for the bare client (pull and
acknowledge in a loop, nothing else: the ceiling the server allows), and what the
deduplication costs per batch: writing the spool, recording the ids and looking the
pulled ids up, in seconds and as a share of the batch.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

DEDUP_STEPS = ("spool_s", "mark_s", "lookup_s")


@dataclass(frozen=True)
class RunFigures:
    messages: int
    batches: int
    driver_per_second: float
    client_per_second: float
    dedup_seconds_per_batch: float
    """Median over the batches after the first."""
    dedup_share: float
    """Median of dedup seconds / (batch seconds + pull and ack seconds)."""
    batch_seconds: float
    exact: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_figures(
    events: Sequence[Mapping[str, Any]], client_per_second: float, *, exact: bool
) -> RunFigures:
    """The figures of one run from the driver's ``batch`` and ``pubsub batch`` events."""
    batches = {e["batch_id"]: e for e in events if e.get("event") == "batch"}
    pubsub = [e for e in events if e.get("event") == "pubsub batch"]
    steady = [e for e in pubsub if e["batch_id"] > 1]
    if len(steady) < 2:
        raise ValueError("fewer than three batches: publish more messages")
    first, last = _ts(pubsub[0]), _ts(pubsub[-1])
    carried = sum(e["messages"] for e in steady)
    dedup = [sum(e.get(k, 0.0) for k in DEDUP_STEPS) for e in steady]
    whole = [
        batches[e["batch_id"]]["batch_s"] + e.get("pull_s", 0.0) + e.get("ack_s", 0.0)
        for e in steady
    ]
    return RunFigures(
        messages=sum(e["messages"] for e in pubsub),
        batches=len(pubsub),
        driver_per_second=carried / max(1e-9, (last - first)),
        client_per_second=client_per_second,
        dedup_seconds_per_batch=statistics.median(dedup),
        dedup_share=statistics.median(d / w for d, w in zip(dedup, whole, strict=True)),
        batch_seconds=statistics.median(batches[e["batch_id"]]["batch_s"] for e in steady),
        exact=exact,
    )


def _ts(event: Mapping[str, Any]) -> float:
    return datetime.fromisoformat(str(event["ts"])).timestamp()


def summary(runs: Sequence[RunFigures]) -> dict[str, Any]:
    """Medians over the runs, and the driver's throughput as a share of the client's."""
    driver = statistics.median(r.driver_per_second for r in runs)
    client = statistics.median(r.client_per_second for r in runs)
    return {
        "runs": len(runs),
        "exact_runs": sum(r.exact for r in runs),
        "messages_per_run": runs[0].messages,
        "batches_per_run": statistics.median(r.batches for r in runs),
        "driver_messages_per_second": round(driver, 1),
        "client_messages_per_second": round(client, 1),
        "driver_over_client": round(driver / client, 3) if client else None,
        "dedup_seconds_per_batch": round(
            statistics.median(r.dedup_seconds_per_batch for r in runs), 4
        ),
        "dedup_share_of_batch": round(statistics.median(r.dedup_share for r in runs), 3),
        "batch_seconds": round(statistics.median(r.batch_seconds for r in runs), 3),
    }


def markdown(found: Mapping[str, Any], per_batch: int) -> str:
    return "\n".join(
        [
            f"# Pub/Sub source: pull -> acknowledge ({found['runs']} runs, medians)",
            "",
            f"{found['messages_per_run']:,} messages per run, batches of up to {per_batch:,}; "
            f"sink exact in {found['exact_runs']} of {found['runs']} runs.",
            "",
            "| figure | value |",
            "|---|---|",
            f"| driver, pull -> commit -> ack | {found['driver_messages_per_second']:,} msg/s |",
            "| bare client, pull -> ack (ceiling) | "
            f"{found['client_messages_per_second']:,} msg/s |",
            f"| driver / client | {found['driver_over_client']} |",
            f"| median batch | {found['batch_seconds']} s |",
            "| deduplication per batch (spool, ids, lookups) | "
            f"{found['dedup_seconds_per_batch']} s "
            f"({found['dedup_share_of_batch']:.0%} of the batch) |",
            "",
        ]
    )
