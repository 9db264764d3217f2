"""``make audit``'s decisions (sluice_dev.vulnaudit), without the network: what counts
as a finding, what the ignore file may accept and how it must say why, that a
package the tool skipped is never reported clean, and what the user reads."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_dev import pins, vulnaudit
from sluice_dev.paths import REPO_ROOT
from sluice_dev.vulnaudit import AuditError, Finding, Ignore

pytestmark = pytest.mark.unit

DIGEST = "sha256:" + "a" * 64
PINNED = pins.parse(
    f"aiohttp==3.14.5 --hash={DIGEST}\nurllib3==2.8.0 --hash={DIGEST}\n"
    f"pyyaml==6.0.3 --hash={DIGEST}\n"
)
REPORT: dict[str, Any] = {
    "dependencies": [
        {
            "name": "aiohttp",
            "version": "3.14.5",
            "vulns": [
                {
                    "id": "GHSA-aaaa-bbbb-cccc",
                    "fix_versions": ["3.14.6"],
                    "aliases": ["CVE-2026-1"],
                    "description": "x",
                }
            ],
        },
        {"name": "PyYAML", "version": "6.0.3", "vulns": []},
        {"name": "urllib3", "skip_reason": "Dependency not found on PyPI and could not be audited"},
    ],
    "fixes": [],
}


def test_pip_audits_report_gives_findings_audited_and_skipped_packages() -> None:
    findings, audited, skipped = vulnaudit.from_pip_audit(REPORT)
    assert findings == [
        Finding("aiohttp", "3.14.5", "GHSA-aaaa-bbbb-cccc", ("CVE-2026-1",), ("3.14.6",))
    ]
    assert audited == {"aiohttp", "pyyaml"}
    assert skipped == ["urllib3"]


def test_a_skipped_package_is_not_audited_unless_it_is_its_projects_newest_release() -> None:
    pin = PINNED["urllib3"]
    newest = {"info": {"version": "2.8.0"}, "vulnerabilities": [
        {"id": "PYSEC-1", "aliases": None, "fixed_in": None, "withdrawn": None},
        {"id": "GHSA-1", "aliases": ["PYSEC-1"], "fixed_in": None, "withdrawn": None},
        {"id": "PYSEC-2", "aliases": [], "fixed_in": ["2.9"], "withdrawn": "2026-01-01"},
    ]}  # fmt: skip
    assert vulnaudit.from_project(pin, newest) == [Finding("urllib3", "2.8.0", "PYSEC-1")]
    assert vulnaudit.from_project(pin, {"info": {"version": "2.9.0"}}) is None


def test_findings_fail_the_audit_unless_ignored_by_id_or_alias_with_a_reason() -> None:
    found = Finding("aiohttp", "3.14.5", "GHSA-aaaa-bbbb-cccc", ("CVE-2026-1",), ("3.14.6",))
    failing = vulnaudit.judge([found], [], [], audited=3)
    assert failing.findings == [found]
    assert failing.exit_code == 1
    accepted = vulnaudit.judge([found], [Ignore("CVE-2026-1", "not reachable")], [], 3)
    assert accepted.findings == []
    assert accepted.ignored == [(found, "not reachable")]
    assert accepted.exit_code == 0
    stale = vulnaudit.judge([], [Ignore("GHSA-old", "fixed since")], [], 3)
    assert stale.unused_ignores == ["GHSA-old"]
    assert stale.exit_code == 0


def test_a_package_that_could_not_be_audited_fails_the_audit() -> None:
    verdict = vulnaudit.judge([], [], ["urllib3"], audited=2)
    verdict.newest = {"urllib3": "2.9.0"}
    assert verdict.exit_code == 1
    text = vulnaudit.render(verdict, PINNED)
    assert "2 of 3 pinned packages audited." in text
    assert "1 not audited" in text
    assert "  urllib3 2.8.0 (newest: 2.9.0)" in text.splitlines()


def test_the_report_names_package_version_ids_and_fix() -> None:
    found = Finding("aiohttp", "3.14.5", "GHSA-aaaa-bbbb-cccc", ("CVE-2026-1",), ("3.14.6",))
    unfixed = Finding("pyyaml", "6.0.3", "PYSEC-9")
    text = vulnaudit.render(vulnaudit.judge([unfixed, found], [], [], 3), PINNED)
    assert text.splitlines() == [
        "3 of 3 pinned packages audited.",
        "2 known vulnerabilities:",
        "  aiohttp 3.14.5  GHSA-aaaa-bbbb-cccc, CVE-2026-1  fixed in: 3.14.6",
        "  pyyaml 6.0.3  PYSEC-9  fixed in: no fix released",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[ignore]]\nid = "GHSA-x"\n', "ignore #1 needs a non-empty 'reason'"),
        ('[[ignore]]\nid = "GHSA-x"\nreason = "  "\n', "ignore #1 needs a non-empty 'reason'"),
        (
            '[[ignore]]\nid = "A"\nreason = "r"\n[[ignore]]\nreason = "r"\n',
            "ignore #2 needs a non-empty 'id'",
        ),
        ('ignore = "GHSA-x"\n', "'ignore' must be an array of tables"),
        ("ignore = [\n", "not TOML"),
    ],
)
def test_an_ignore_entry_without_id_or_reason_is_an_error_naming_it(
    text: str, message: str
) -> None:
    with pytest.raises(AuditError, match=message):
        vulnaudit.read_ignores(text)


def test_the_committed_ignore_file_is_valid() -> None:
    assert vulnaudit.read_ignores((REPO_ROOT / "audit-ignore.toml").read_text()) == []
