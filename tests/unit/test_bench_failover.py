"""``bench.failover``'s pure parts: the manifest each mode applies (only
``spec.standby`` differs, which restarts nothing) and the table a reader compares."""

from __future__ import annotations

import pytest

from bench import failover
from bench.failover import Kill, ModeResult
from sluice_api.spec import PipelineSpec
from sluice_operator import changes

pytestmark = pytest.mark.unit


def test_the_modes_differ_only_in_spec_standby_which_restarts_no_driver() -> None:
    specs = {
        mode: PipelineSpec.model_validate(failover.manifest(mode, "t", "ks")["spec"])
        for mode in failover.MODES
    }
    assert (specs["NoStandby"].standby, specs["HotStandby"].standby) == (0, 1)
    assert changes.spec_hash(specs["NoStandby"]) == changes.spec_hash(specs["HotStandby"])


def test_the_report_gives_each_modes_median_and_what_a_standby_costs() -> None:
    cold = ModeResult(
        "NoStandby", [Kill("NoStandby", e, s, s - 1) for e, s in ((1, 40.0), (3, 36.0), (5, 50.0))]
    )
    hot = ModeResult(
        "HotStandby",
        [
            Kill("HotStandby", e, s, s + 0.5, 900.0 + e, 800.0 + e, 0.02 * e)
            for e, s in ((2, 3.0), (4, 2.5), (6, 9.0))
        ],
    )
    text = failover.report([cold, hot], exact=True, load=1.5)
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "| 40.00 s | 39.00 s |" in rows["NoStandby"]
    assert "| 3.00 s | 3.50 s |" in rows["HotStandby"]
    assert "804 MB resident (the driver beside it: 904 MB), 0.080 of a core" in text
    assert "Sink exact: yes" in text
    assert "median of 3" in text


def test_the_command_line_sets_the_fields_given_and_keeps_the_rest() -> None:
    settings = failover.parse(["--kills", "3", "--settle-seconds", "12.5", "--results", "/r"])
    assert (settings.kills, settings.settle_seconds) == (3, 12.5)
    assert str(settings.results) == "/r"
    assert settings.rate == failover.Settings().rate
