"""The provisioning cache shared by every clone on a machine: one build per artifact.

Reproduction: a CI rehearsal in a fresh clone was building Kubernetes when a test
session of the working copy provisioned the same artifact; the second ``ensure``
removed the first one's half-finished directory and the first build failed with
``FileNotFoundError: .../kubernetes-1.34.4-....partial/.complete``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sluice_dev.artifacts import Artifact, Outcome, ensure
from sluice_dev.paths import Layout

pytestmark = pytest.mark.unit


def test_two_provisioners_of_one_artifact_build_it_once_and_both_get_it(tmp_path: Path) -> None:
    layout = Layout(cache=tmp_path / "cache", stack=tmp_path / "stack")
    builds: list[Path] = []
    building, finish = threading.Event(), threading.Event()

    def build(target: Path) -> None:
        builds.append(target)
        building.set()
        finish.wait(60)
        (target / "binary").write_text("built")

    artifact = Artifact("thing", "1.0", build)
    outcomes: dict[str, Outcome | BaseException] = {}

    def provision(who: str) -> None:
        try:
            outcomes[who] = ensure(artifact, layout)
        except BaseException as err:  # the test reports it below
            outcomes[who] = err

    first = threading.Thread(target=provision, args=("first",))
    first.start()
    assert building.wait(30)
    second = threading.Thread(target=provision, args=("second",))
    second.start()
    second.join(timeout=1.0)  # time to start a second build, as the old code did
    assert second.is_alive(), "the second provisioner waits for the first"
    finish.set()
    first.join(60)
    second.join(60)

    assert len(builds) == 1
    assert [type(outcomes[w]) for w in ("first", "second")] == [Outcome, Outcome]
    assert (artifact.path(layout) / "binary").read_text() == "built"
