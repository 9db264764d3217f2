"""The operator benchmark's arithmetic and report (``make bench-operator``)."""

from __future__ import annotations

import pytest

from bench.operator_scale import Phase, percentile, report

pytestmark = pytest.mark.unit


def test_percentiles_are_nearest_rank_over_the_measured_values() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) in (50.0, 51.0)
    assert percentile(values, 0.99) == 99.0
    assert percentile([3.0], 0.99) == 3.0


def test_the_report_gives_each_phase_and_the_ratios_to_the_targets() -> None:
    create = Phase("create", to_pod=[1.0, 3.0], to_running=[2.0, 4.0], rss_mb=100.0)
    delete = Phase("delete", to_running=[5.0, 6.0], rss_mb=120.0)
    text = report([create, delete], count=2)
    assert "| create | 2/2 Running |" in text
    assert "| delete | 2/2 gone |" in text
    assert "create -> pod p99 / target 2 s: 1.50" in text
    assert "operator RSS / target 200 MB: 0.60" in text
