"""``bench.handover``'s pure parts: the manifest each upgrade applies and the table of
medians a reader compares."""

from __future__ import annotations

import pytest

from bench import handover
from bench.handover import ModeResult, Upgrade
from sluice_api.replacement import UpgradeMode
from sluice_api.spec import PipelineSpec

pytestmark = pytest.mark.unit


def test_each_upgrade_applies_a_valid_spec_in_its_mode() -> None:
    for mode in handover.MODES:
        raw = handover.manifest("handover", mode, "sluice-bench/job:v2", "t", "ks")
        spec = PipelineSpec.model_validate(raw["spec"])
        assert spec.upgrade.mode is UpgradeMode(mode)
        assert spec.image == "sluice-bench/job:v2"


def test_the_report_gives_each_modes_median_gap_beside_the_other() -> None:
    clean = ModeResult(
        "CleanStop",
        [Upgrade("CleanStop", e, g, g + 1) for e, g in ((2, 18.0), (4, 20.0), (6, 30.0))],
        900,
        900,
    )
    warm = ModeResult(
        "WarmHandover",
        [Upgrade("WarmHandover", e, g, 60.0) for e, g in ((3, 2.0), (5, 1.5), (7, 9.0))],
        900,
        899,
    )
    text = handover.report([clean, warm], load=3.2)
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "| 20.00 s | 21.00 s |" in rows["CleanStop"]
    assert "| 2.00 s | 60.00 s |" in rows["WarmHandover"]
    assert "yes" in rows["CleanStop"]
    assert "no (899 rows for 900 events)" in rows["WarmHandover"]
    assert "median of 3" in text
    assert "3.2" in text
