"""``sluice-dev dashboard`` without a server: the chart's dashboard's queries as
Grafana would send them (variables replaced), legends, the terminal summary (which
names every query without data) and the PNG of the key panels."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sluice_dev.dashboard import plot, queries, summary
from sluice_dev.dashboard.fetch import Answer, Series

pytestmark = pytest.mark.unit


def test_every_panel_target_of_the_chart_dashboard_is_a_query() -> None:
    found = queries.queries(queries.load())
    targets = sum(len(p.get("targets", [])) for p in queries.load()["panels"])
    assert len(found) == targets == 13
    assert {q.panel for q in found if q.key} == {
        "Throughput (records/s)",
        "Consumer lag (records)",
        "Batch phase duration p95",
        "Commits (batches/s) and seconds since the last",
    }


def test_variables_are_replaced_as_grafana_does() -> None:
    expr = 'sum(rate(sluice_batches_total{pipeline=~"$pipeline"}[$__rate_interval]))'
    sent = queries.substitute(expr, pipeline="ns/p", rate=queries.rate_interval(5, 15))
    assert sent == 'sum(rate(sluice_batches_total{pipeline=~"ns/p"}[20s]))'
    assert queries.rate_interval(15, 60) == "75s"
    for query in queries.queries(queries.load()):
        assert "$" not in queries.substitute(query.expr), query.expr


def test_legends_fill_the_series_labels() -> None:
    labels = {"pipeline": "ns/p", "phase": "write"}
    assert queries.legend("{{pipeline}} {{ phase }}", labels) == "ns/p write"
    assert queries.legend("", {"pipeline": "ns/p"}) == '{pipeline="ns/p"}'


def answer(panel: str, *series: Series) -> Answer:
    return Answer(queries.Query(panel, "x", ""), "x", series)


def test_the_summary_shows_each_series_and_names_every_query_without_data() -> None:
    lag = Series("ns/p", tuple((float(t), float(t * 10)) for t in range(60)))
    gaps = Series("ns/p write", ((0.0, math.nan), (1.0, 0.5)))
    answers = [answer("Lag", lag), answer("Latency", gaps), answer("Epoch")]
    text = summary.render(answers)
    assert "Lag\n  ns/p" in text
    assert "last       590" in text
    assert "▁" in text
    assert "█" in text
    assert "NO DATA  x" in text
    assert summary.missing(answers) == [answers[2]]
    assert summary.sparkline([(0, math.nan), (1, 1.0), (2, 1.0)]) == " ▁▁"
    assert len(summary.sparkline([(float(i), float(i)) for i in range(500)])) == summary.WIDTH


def test_the_key_panels_make_a_png(tmp_path: Path) -> None:
    lag = Series("ns/p", tuple((1000.0 + t * 15, float(t)) for t in range(20)))
    written = plot.write_png([answer("Lag", lag), answer("Commits")], tmp_path / "d.png")
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_pipeline_is_matched_exactly_in_promqls_own_escaping() -> None:
    assert queries.exactly("shop-1/kpis") == "shop-1/kpis"
    assert queries.exactly("a.b/c") == "a\\\\.b/c"
