"""``bench.state_figures``: a contender's drain from its driver's ``batch`` events (the
first batch left out) and the summary against the stateless contender."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bench.state_figures import Drain, drain, markdown, steady, steady_summary, summary

pytestmark = pytest.mark.unit


def batch(records: int, seconds: float, write: float) -> dict[str, object]:
    return {"event": "batch", "records": records, "batch_s": seconds, "write_s": write}


def test_a_drain_leaves_out_the_first_batch_and_idle_ones() -> None:
    events = [
        batch(5_000, 30.0, 29.0),  # the JVM's warm-up
        batch(5_000, 1.0, 0.8),
        {"event": "phase"},
        batch(0, 0.1, 0.0),
        batch(3_000, 1.0, 0.6),
    ]
    found = drain("kpi", events, exact=True)
    assert (found.batches, found.records) == (2, 8_000)
    assert found.records_per_s == 4_000
    assert (found.batch_p50_s, found.write_p50_s) == (1.0, 0.7)
    with pytest.raises(ValueError, match="committed no batch"):
        drain("kpi", [{"event": "phase"}], exact=True)


def test_the_summary_sets_each_contender_beside_the_first() -> None:
    def run(kpi: float, dedup: float) -> list[Drain]:
        return [
            Drain("kpi", 4, 20_000, kpi, 1.0, 1.2, 0.8, True),
            Drain("dedup", 4, 20_000, dedup, 8.0, 9.0, 7.5, dedup > 500),
        ]

    rows = summary([run(4_000, 600), run(5_000, 400), run(4_500, 700)])
    assert [(r["contender"], r["records_per_s"], r["of_stateless"]) for r in rows] == [
        ("kpi", 4_500, 1.0),
        ("dedup", 600, 0.133),
    ]
    assert (rows[1]["exact_runs"], rows[1]["runs"]) == (2, 3)
    assert "| dedup | 600 | 0.13 |" in markdown(rows, 24_001, 5_000)


def stateful(records: int, seconds: float, read: float, keys: int, at: str) -> dict[str, object]:
    return {
        **batch(records, seconds, seconds - 0.2),
        "state_read_s": read,
        "state_keys_read": keys,
        "state_write_s": 0.5,
        "ts": at,
    }


def test_a_drain_reports_the_state_reads_per_batch_of_a_stateful_contender() -> None:
    events = [stateful(5_000, 9.0, 3.0, 10_000, "2026-12-04T00:00:00Z")]
    events += [stateful(5_000, 2.0, 0.1 * n, 8_000 + n, "2026-12-04T00:00:01Z") for n in range(9)]
    found = drain("dedup", events, exact=True)
    assert (found.state_read_p50_s, found.keys_read_p50) == (0.4, 8_004)
    assert found.state_read_p99_s == pytest.approx(0.8, abs=0.01)
    stateless = drain("kpi", [batch(5_000, 1.0, 0.8), batch(5_000, 1.0, 0.8)], exact=True)
    assert stateless.state_read_p99_s is None
    assert "| kpi | 5,000 | 1.00 | 1.00 | 1.00 | 0.80 | - | - | - |" in markdown(
        summary([[stateless]]), 10_000, 5_000
    )


def test_the_live_figures_count_only_the_batches_committed_in_the_window() -> None:
    events = [
        stateful(5_000, 20.0, 5.0, 5_000, "2026-12-04T00:00:05Z"),  # the warm-up's
        stateful(5_000, 1.0, 0.3, 5_000, "2026-12-04T00:00:12Z"),
        stateful(5_000, 1.0, 0.5, 5_000, "2026-12-04T00:00:13Z"),
        stateful(2_500, 1.0, 0.2, 2_500, "2026-12-04T00:00:14Z"),
        stateful(9_000, 3.0, 2.0, 9_000, "2026-12-04T00:00:21Z"),  # after producing ended
    ]
    began = datetime(2026, 12, 4, 0, 0, 10, tzinfo=UTC).timestamp()
    fed = steady(
        "dedup", events, window=(began, began + 5), rate=5_000, behind_s=0.4, sustained=True
    )
    assert (fed.batches, fed.committed_per_s, fed.state_read_p50_s) == (3, 2_500, 0.3)
    outlasted = steady("dedup", events, window=(0, 1), rate=5_000, behind_s=30, sustained=True)
    assert (outlasted.batches, outlasted.batch_p99_s, outlasted.sustained) == (0, None, False)
    rows = steady_summary([[fed], [fed], [replace(fed, sustained=False, behind_s=9.0)]])
    assert (rows[0]["behind_s"], rows[0]["sustained_runs"], rows[0]["runs"]) == (0.4, 2, 3)
    assert "| dedup | 2,500 | 1.00 | 1.00 | 0.30 |" in markdown([], 0, 0, rows)
