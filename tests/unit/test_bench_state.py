"""``bench.state_figures``: a contender's drain from its driver's ``batch`` events (the
first batch left out) and the summary against the stateless contender."""

from __future__ import annotations

import pytest

from bench.state_figures import Drain, drain, markdown, summary

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
