"""The Sluice alerts (charts/sluice/files/alerts.yaml) as an on-call engineer meets
them: promtool accepts the rules, every alert fires in its promtool unit test and
stays quiet in another, each carries a summary, a description and a runbook link to
an existing section of docs/alerts.md, and each reads only series that Sluice
exports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import sluice_job.metrics  # noqa: F401  (defines the driver's series in REGISTRY)
import sluice_operator.metrics  # noqa: F401  (defines the operator's series)
from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.unit

RULES = REPO_ROOT / "charts" / "sluice" / "files" / "alerts.yaml"
PROMTOOL_TESTS = REPO_ROOT / "tests" / "alerts" / "alerts_test.yaml"
RUNBOOKS = REPO_ROOT / "docs" / "alerts.md"
RUNBOOK_BASE = "https://github.com/sluice-dev/sluice/blob/main/docs/alerts.md"
EXPECTED = {
    "SluicePipelineNotCommitting",
    "SluicePipelineLagGrowing",
    "SluiceDriverRestartLoop",
    "SluiceDriverFenced",
    "SluicePipelineFailed",
    "SluiceUpgradeStuck",
    "SluiceOperatorDown",
    "SluiceDependencyUnavailable",
    "SluicePubSubMessagesAging",
    "SluiceDriverDown",
}


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_accepts_the_rules(promtool: Path) -> None:
    checked = run(promtool, "check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout


def test_promtool_unit_tests_pass(promtool: Path) -> None:
    tested = run(promtool, "test", "rules", str(PROMTOOL_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_issue_s_alerts_are_all_there() -> None:
    assert {rule["alert"] for rule in alerts()} == EXPECTED


def test_each_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", ()):
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert fired == EXPECTED, f"never fired: {sorted(EXPECTED - fired)}"
    assert quiet == EXPECTED, f"never checked quiet: {sorted(EXPECTED - quiet)}"


@pytest.mark.parametrize("rule", alerts(), ids=lambda rule: rule["alert"])
def test_each_alert_explains_itself_and_links_its_runbook(rule: dict[str, Any]) -> None:
    notes = rule["annotations"]
    per_pipeline = re.search(r"by \(pipeline\b", rule["expr"]) is not None
    assert notes["summary"].strip()
    assert ("{{ $labels.pipeline }}" in notes["summary"]) is per_pipeline
    assert len(notes["description"]) > 60
    assert rule["labels"]["severity"] in ("critical", "warning")
    assert notes["runbook_url"] == f"{RUNBOOK_BASE}#{rule['alert'].lower()}"
    headings = re.findall(r"^## (\S+)$", RUNBOOKS.read_text(), flags=re.MULTILINE)
    assert rule["alert"] in headings, f"docs/alerts.md has no '## {rule['alert']}' runbook"


def exported() -> set[str]:
    """Every series name the driver and the operator export (counters with _total,
    histograms with their _bucket/_sum/_count), plus Prometheus' own ``up``."""
    names = {"up"}
    for family in REGISTRY.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(f"{family.name}_total")
    return names


@pytest.mark.parametrize("rule", alerts(), ids=lambda rule: rule["alert"])
def test_each_alert_reads_only_series_sluice_exports(rule: dict[str, Any]) -> None:
    used = set(re.findall(r"\b(sluice_\w+|up)\b", rule["expr"]))
    assert used, rule["expr"]
    unknown = used - exported()
    assert not unknown, f"{rule['alert']} reads series nobody exports: {sorted(unknown)}"
