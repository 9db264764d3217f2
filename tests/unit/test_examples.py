"""The manifests under examples/ are valid pipelines that name real transforms."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest
import yaml

from sluice_api.spec import PipelineSpec
from sluice_dev.paths import REPO_ROOT
from sluice_operator import naming

pytestmark = pytest.mark.unit

MANIFESTS = sorted((REPO_ROOT / "examples").glob("*.yaml"))


def test_the_examples_hold_a_cassandra_and_a_datastore_pipeline() -> None:
    sinks = {next(iter(yaml.safe_load(p.read_text())["spec"]["sink"])) for p in MANIFESTS}
    assert sinks == {"cassandra", "datastore"}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_an_example_is_a_valid_pipeline_whose_transform_imports(path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    assert body["apiVersion"] == f"{naming.GROUP}/{naming.VERSION}"
    assert body["kind"] == naming.KIND
    spec = PipelineSpec.model_validate(body["spec"])
    module, _, function = spec.transform.entrypoint.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


# -- examples/custom-transform: a user's package in a derived job image -------------

CUSTOM = REPO_ROOT / "examples" / "custom-transform"


def test_the_custom_transform_manifest_is_a_valid_pipeline_naming_the_example_package() -> None:
    body = yaml.safe_load((CUSTOM / "pipeline.yaml").read_text())
    assert (body["apiVersion"], body["kind"]) == (f"{naming.GROUP}/{naming.VERSION}", naming.KIND)
    spec = PipelineSpec.model_validate(body["spec"])
    module, _, function = spec.transform.entrypoint.partition(":")
    source = CUSTOM / "src" / (module.replace(".", "/") + ".py")
    assert f"def {function}(" in source.read_text()
    # Only the image has it: neither the repository's paths nor the virtualenv.
    assert importlib.util.find_spec(module.partition(".")[0]) is None


def test_the_custom_transform_dockerfile_installs_the_package_into_the_job_image() -> None:
    from tests.unit.test_dockerfiles import parse

    dockerfile = parse(CUSTOM / "Dockerfile")
    job_image = yaml.safe_load((REPO_ROOT / "examples" / "kpi-pipeline.yaml").read_text())
    assert dockerfile.expand(dockerfile.final.base) == job_image["spec"]["image"]
    (install,) = dockerfile.final.all("RUN")
    assert "--python /opt/venv/bin/python install" in install, "into the job's virtualenv"
    assert "--no-deps" in install, "the job image's pinned dependencies stay as they are"
    assert "from=wheel" in install
    assert dockerfile.final.all("USER")[-1] == "185:185", "back to the job image's user"
    assert not dockerfile.final.all("ENTRYPOINT"), "the job image's entrypoint runs"
    (wheel,) = [s for s in dockerfile.stages if s.name == "wheel"]
    for copied in wheel.all("COPY"):
        *sources, _ = copied.split()
        assert all((CUSTOM / s).exists() for s in sources), copied
    assert "--no-deps" in " ".join(wheel.all("RUN"))
