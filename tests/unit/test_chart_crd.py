"""The Helm chart ships the same StreamingPipeline CRD as ``crds/``: a user who installs
with ``helm install`` and one who runs ``kubectl apply -f crds/`` get the same schema,
and one command (``make crds``) regenerates both copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice_dev.paths import REPO_ROOT
from sluice_operator import crd

pytestmark = pytest.mark.unit

TOP_LEVEL = REPO_ROOT / "crds" / crd.FILE_NAME
IN_CHART = REPO_ROOT / "charts" / "sluice" / "crds" / crd.FILE_NAME


def test_chart_crd_is_byte_identical_to_the_top_level_one() -> None:
    assert IN_CHART.read_bytes() == TOP_LEVEL.read_bytes(), (
        f"{IN_CHART.relative_to(REPO_ROOT)} differs from {TOP_LEVEL.relative_to(REPO_ROOT)}; "
        f"regenerate both with `make crds` ({crd.REGENERATE})"
    )


def test_chart_crd_is_generated_from_the_model() -> None:
    assert IN_CHART.read_text(encoding="utf-8") == crd.render(crd.build_crd()), (
        f"{IN_CHART.relative_to(REPO_ROOT)} is stale; regenerate it with `make crds`"
    )


def test_the_chart_holds_nothing_else_in_crds() -> None:
    """Helm applies every file of ``crds/``: a stray file would be installed too."""
    assert sorted(p.name for p in IN_CHART.parent.iterdir()) == [crd.FILE_NAME]


def test_write_regenerates_both_copies(tmp_path: Path) -> None:
    assert crd.main(["--write", "--root", str(tmp_path)]) == 0
    written = [tmp_path / destination for destination in crd.DESTINATIONS]
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        f"crds/{crd.FILE_NAME}",
        f"charts/sluice/crds/{crd.FILE_NAME}",
    ]
    assert written[0].read_bytes() == written[1].read_bytes() == TOP_LEVEL.read_bytes()


def test_header_names_the_command_that_regenerates_both() -> None:
    assert f"# Regenerate: {crd.REGENERATE}" in TOP_LEVEL.read_text(encoding="utf-8")
    assert "--write" in crd.REGENERATE
