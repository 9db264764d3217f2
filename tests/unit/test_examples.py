"""The manifests under examples/ are valid pipelines that name real transforms."""

from __future__ import annotations

import importlib
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
