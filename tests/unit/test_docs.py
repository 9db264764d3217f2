"""The product documents itself inside the repository: every relative link of the
README and of docs/ resolves, and no file points at notes outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.unit

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# Spelt in pieces so that this file itself names no place outside the repository.
OUTSIDE = ("/".join(("..", "shared")), "DESIGN" + ".md")


def documents() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.name)
def test_every_relative_link_resolves_inside_the_repository(document: Path) -> None:
    broken = []
    for target in LINK.findall(document.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor of the same page
        path = (document.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or REPO_ROOT.resolve() not in path.parents:
            broken.append(target)
    assert not broken, f"{document.relative_to(REPO_ROOT)}: links that do not resolve: {broken}"


def test_no_file_of_the_product_points_outside_the_repository() -> None:
    files = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for name in files:
        if name == "tests/unit/test_docs.py":
            continue  # this test names what it looks for
        try:
            text = (REPO_ROOT / name).read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if any(needle in line for needle in OUTSIDE):
                found.append(f"{name}:{number}: {line.strip()[:80]}")
    assert not found, "references outside the repository:\n" + "\n".join(found)
