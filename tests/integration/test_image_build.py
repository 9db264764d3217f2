"""``sluice-dev image build`` on the example package: what it leaves for the node agent
(the package alone, registered under its tag, replaced atomically by a rebuild), and the
example's own tests passing against the built directory, so ``make test`` runs them as
their user would (``pytest`` in ``examples/custom-transform``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sluice_dev.imagebuild import build, parse_reference
from sluice_dev.nodeagent.images import ImageMap
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.servers import nodeagent

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "custom-transform"


def test_the_example_builds_into_a_registered_directory_that_imports_it_alone(
    layout: Layout, job_image_env: dict[str, str], tmp_path: Path
) -> None:
    local = Layout(cache=layout.cache, stack=tmp_path / "stack")
    ref = parse_reference("clickscore:0.1.0")
    first = build(local, EXAMPLE, ref, job_image_env)
    assert first.packages == ("clickscore",)
    registered = json.loads(nodeagent.images_file(local).read_text())
    assert registered == {"*": None, "clickscore:0.1.0": str(first.directory)}
    assert ImageMap(file=nodeagent.images_file(local)).resolve(str(ref)) == first.directory
    found = subprocess.run(
        [sys.executable, "-c", "import clickscore.scoring as m; print(m.__file__)"],
        env={**os.environ, "PYTHONPATH": str(first.directory)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == str(first.directory / "clickscore" / "scoring.py")
    leftovers = [p.name for p in EXAMPLE.rglob("*") if p.name == "build" or ".egg-info" in p.name]
    assert leftovers == [], "the build leaves the user's directory as it was"

    second = build(local, EXAMPLE, ref, job_image_env)
    third = build(local, EXAMPLE, ref, job_image_env)
    registered = json.loads(nodeagent.images_file(local).read_text())
    assert registered["clickscore:0.1.0"] == str(third.directory)
    kept = sorted(p for p in third.directory.parent.iterdir())
    assert kept == [second.directory, third.directory], "the previous build stays for its pods"


def test_the_examples_own_tests_pass_against_the_built_image(
    layout: Layout, job_image_env: dict[str, str], tmp_path: Path
) -> None:
    local = Layout(cache=layout.cache, stack=tmp_path / "stack")
    built = build(local, EXAMPLE, parse_reference("clickscore:test"), job_image_env)
    paths = [str(built.directory), os.environ.get("PYTHONPATH", "")]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=EXAMPLE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
    assert "failed" not in run.stdout
