"""``make audit``: every pinned package of constraints.txt against known vulnerabilities.

The tool is pip-audit (pinned in the dev extra), run on the hashed constraints file
with ``--require-hashes --disable-pip``: it audits exactly the pins and installs
nothing. Its database is the vulnerability data PyPI publishes per release (from
OSV), at ``/pypi/NAME/VERSION/json``. Where that endpoint answers 404 (the package
index this project's machines reach does) pip-audit *skips* the package and still
prints "No known vulnerabilities found"; here a skipped package is never counted as
clean. For a skipped pin that is the project's newest release, the project endpoint
(``/pypi/NAME/json``, which carries the newest release's vulnerabilities) is asked
instead; any other skipped pin is reported as not audited.

Output: one line per finding (package, version, id and aliases, fixed in), then the
findings the ignore file accepts (with its reason), then what could not be audited.
Exit status 1 on any finding the ignore file does not list with a reason, or any
package not audited; 2 when pip-audit itself fails; 0 otherwise.

:func:`read_ignores`, :func:`from_pip_audit`, :func:`from_project`, :func:`judge` and
:func:`render` are purely computational; :func:`main` runs pip-audit and asks the
index.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sluice_dev import pins
from sluice_dev.paths import REPO_ROOT

INDEX: Final = "https://pypi.org/pypi"
TIMEOUT_SECONDS: Final = 30.0


class AuditError(RuntimeError):
    """The audit could not run; the message names the file, field or tool."""


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    id: str
    aliases: tuple[str, ...] = ()
    fixed_in: tuple[str, ...] = ()

    @property
    def names(self) -> frozenset[str]:
        return frozenset({self.id, *self.aliases})


@dataclass(frozen=True)
class Ignore:
    id: str
    reason: str


@dataclass
class Verdict:
    findings: list[Finding] = field(default_factory=list)
    ignored: list[tuple[Finding, str]] = field(default_factory=list)
    unaudited: list[str] = field(default_factory=list)
    unused_ignores: list[str] = field(default_factory=list)
    audited: int = 0
    newest: dict[str, str] = field(default_factory=dict)
    """The newest release of each package not audited, where the index said."""

    @property
    def exit_code(self) -> int:
        return 1 if self.findings or self.unaudited else 0


def read_ignores(text: str, source: str = "audit-ignore.toml") -> list[Ignore]:
    """``[[ignore]]`` tables, each with an ``id`` (or one of its aliases) and a
    non-empty ``reason``: why the finding does not apply or cannot be fixed yet."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise AuditError(f"{source}: not TOML: {error}") from error
    entries = data.get("ignore", [])
    if not isinstance(entries, list):
        raise AuditError(f"{source}: 'ignore' must be an array of tables ([[ignore]])")
    found = []
    for number, entry in enumerate(entries, start=1):
        for key in ("id", "reason"):
            value = entry.get(key) if isinstance(entry, dict) else None
            if not isinstance(value, str) or not value.strip():
                raise AuditError(f"{source}: ignore #{number} needs a non-empty '{key}'")
        found.append(Ignore(entry["id"].strip(), entry["reason"].strip()))
    return found


def from_pip_audit(report: Mapping[str, Any]) -> tuple[list[Finding], set[str], list[str]]:
    """pip-audit's ``--format json``: its findings, the packages it audited and the
    packages it skipped (normalized names)."""
    findings, audited, skipped = [], set(), []
    for dependency in report.get("dependencies", []):
        name = pins.normalize(str(dependency["name"]))
        if dependency.get("skip_reason"):
            skipped.append(name)
            continue
        audited.add(name)
        for vuln in dependency.get("vulns", []):
            findings.append(
                Finding(
                    name,
                    str(dependency["version"]),
                    str(vuln["id"]),
                    tuple(vuln.get("aliases", ())),
                    tuple(vuln.get("fix_versions", ())),
                )
            )
    return findings, audited, skipped


def from_project(pin: pins.Pin, project: Mapping[str, Any]) -> list[Finding] | None:
    """The project endpoint's vulnerabilities, which are its newest release's: the
    pin's findings if the pin is that release, else None (not audited)."""
    if project.get("info", {}).get("version") != pin.version:
        return None
    findings: list[Finding] = []
    for vuln in project.get("vulnerabilities") or []:
        found = Finding(
            pin.name,
            pin.version,
            str(vuln["id"]),
            tuple(vuln.get("aliases") or ()),
            tuple(vuln.get("fixed_in") or ()),
        )
        # One advisory is often listed under each of its ids (PYSEC-... and GHSA-...).
        if not vuln.get("withdrawn") and not any(found.names & f.names for f in findings):
            findings.append(found)
    return findings


def judge(
    findings: Iterable[Finding], ignores: Sequence[Ignore], unaudited: Iterable[str], audited: int
) -> Verdict:
    verdict = Verdict(unaudited=sorted(unaudited), audited=audited)
    used = set()
    for finding in sorted(findings, key=lambda f: (f.package, f.id)):
        match = next((i for i in ignores if i.id in finding.names), None)
        if match is None:
            verdict.findings.append(finding)
        else:
            verdict.ignored.append((finding, match.reason))
            used.add(match.id)
    verdict.unused_ignores = sorted(i.id for i in ignores if i.id not in used)
    return verdict


def render(verdict: Verdict, pinned: Mapping[str, pins.Pin]) -> str:
    def row(f: Finding) -> str:
        ids = ", ".join([f.id, *f.aliases])
        fixed = ", ".join(f.fixed_in) or "no fix released"
        return f"  {f.package} {f.version}  {ids}  fixed in: {fixed}"

    lines = [f"{verdict.audited} of {len(pinned)} pinned packages audited."]
    if verdict.findings:
        lines.append(f"{len(verdict.findings)} known vulnerabilities:")
        lines.extend(row(f) for f in verdict.findings)
    else:
        lines.append("No known vulnerabilities in the audited packages.")
    if verdict.ignored:
        lines.append(f"{len(verdict.ignored)} accepted in the ignore file:")
        lines.extend(f"{row(f)}  ({reason})" for f, reason in verdict.ignored)
    if verdict.unused_ignores:
        lines.append("Ignore entries that match nothing (remove them):")
        lines.append("  " + ", ".join(verdict.unused_ignores))
    if verdict.unaudited:
        lines.append(
            f"{len(verdict.unaudited)} not audited: the index has no per-release "
            "vulnerability data for them here (pip-audit skipped them) and they are not "
            "their project's newest release:"
        )
        lines.extend(
            f"  {n} {pinned[n].version}"
            + (f" (newest: {verdict.newest[n]})" if n in verdict.newest else "")
            for n in verdict.unaudited
        )
    return "\n".join(lines)


def run_pip_audit(requirements: Path) -> dict[str, Any]:
    argv = [
        *(sys.executable, "-m", "pip_audit", "--requirement", str(requirements)),
        *("--require-hashes", "--disable-pip", "--vulnerability-service", "pypi"),
        *("--format", "json", "--progress-spinner", "off"),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = "\n".join(done.stderr.strip().splitlines()[-10:])
        raise AuditError(f"pip-audit failed (exit {done.returncode}):\n{tail}") from None
    return report


def fetch_project(name: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"{INDEX}/{name}/json", timeout=TIMEOUT_SECONDS) as answer:
            project: dict[str, Any] = json.load(answer)
            return project
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError):
        return None


def audit(requirements: Path, ignores: Sequence[Ignore]) -> tuple[Verdict, dict[str, pins.Pin]]:
    pinned = pins.parse(requirements.read_text(), str(requirements))
    findings, audited, skipped = from_pip_audit(run_pip_audit(requirements))
    with ThreadPoolExecutor(max_workers=8) as pool:
        projects = dict(zip(skipped, pool.map(fetch_project, skipped), strict=True))
    unaudited, newest = [], {}
    for name, project in projects.items():
        found = from_project(pinned[name], project) if project and name in pinned else None
        if found is None:
            unaudited.append(name)
            newest[name] = str((project or {}).get("info", {}).get("version") or "unknown")
        else:
            findings.extend(found)
            audited.add(name)
    verdict = judge(findings, ignores, unaudited, len(audited))
    verdict.newest = newest
    return verdict, pinned


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice_dev.vulnaudit", description=__doc__)
    parser.add_argument("--requirements", type=Path, default=pins.CONSTRAINTS)
    parser.add_argument("--ignore", type=Path, default=REPO_ROOT / "audit-ignore.toml")
    args = parser.parse_args(argv)
    try:
        ignores = read_ignores(args.ignore.read_text(), str(args.ignore))
        verdict, pinned = audit(args.requirements, ignores)
    except (AuditError, pins.PinError, OSError) as error:
        print(f"audit: {error}", file=sys.stderr)
        return 2
    print(render(verdict, pinned))
    return verdict.exit_code


if __name__ == "__main__":
    sys.exit(main())
