"""The Pub/Sub benchmark's figures from a driver's log events (bench.pubsub_figures)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import pubsub_figures as figures

pytestmark = pytest.mark.unit


def events(batches: int, per_batch: int = 1_000) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    for i in range(1, batches + 1):
        ts = f"2026-11-27T04:00:{10 * i:02d}.000+00:00"
        result.append({"event": "batch", "batch_id": i, "batch_s": 4.0 if i > 1 else 40.0})
        result.append(
            {
                "event": "pubsub batch",
                "ts": ts,
                "batch_id": i,
                "messages": per_batch,
                "spool_s": 0.1,
                "mark_s": 0.2,
                "lookup_s": 0.1,
                "pull_s": 0.5,
                "ack_s": 0.5,
            }
        )
    return result


def test_the_first_batch_is_left_out_of_the_rate_and_the_dedup_share() -> None:
    found = figures.run_figures(events(4), 20_000.0, exact=True)
    # Batches 2..4 (3,000 messages) acknowledged over the 30 s after batch 1's.
    assert found.driver_per_second == pytest.approx(100.0)
    assert found.dedup_seconds_per_batch == pytest.approx(0.4)
    assert found.dedup_share == pytest.approx(0.4 / 5.0)
    assert found.batch_seconds == 4.0
    assert (found.messages, found.batches) == (4_000, 4)


def test_too_few_batches_say_so() -> None:
    with pytest.raises(ValueError, match="publish more messages"):
        figures.run_figures(events(2), 1.0, exact=True)


def test_the_summary_takes_medians_and_the_ratio_to_the_bare_client() -> None:
    runs = [
        figures.run_figures(events(4), client, exact=exact)
        for client, exact in ((10_000.0, True), (20_000.0, True), (30_000.0, False))
    ]
    found = figures.summary(runs)
    assert found["client_messages_per_second"] == 20_000.0
    assert found["driver_over_client"] == 0.005
    assert found["exact_runs"] == 2
    assert "| driver / client | 0.005 |" in figures.markdown(found, 1_000)
