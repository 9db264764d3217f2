"""The driver's configuration (``SLUICE_CONFIG``) holds what the spec sets apart from
the defaults, so a pipeline image built on an older ``sluice-job`` still starts after
the operator is upgraded.

Reproduction (before the fix): the operator sent every field, defaults included. A
driver's spec model refuses fields it does not know, so once the operator gained a
field (``spec.standby``, default 0), every driver whose image carried an older
``sluice-job`` exited 2 ("standby: Extra inputs are not permitted") at its next start:
an operator upgrade failed every pipeline whose image was not rebuilt. This test's
first case failed so on that code: ``standby`` was in the configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_api import env as env_names
from sluice_api.spec import PipelineSpec
from sluice_dev.paths import REPO_ROOT
from sluice_operator import builders
from tests.support.observations import spec

pytestmark = pytest.mark.unit

OWNER = builders.Owner("kpis", "ns", "u1", "cluster-1")


def config(pipeline: PipelineSpec) -> dict[str, Any]:
    env = {e["name"]: e for e in builders.driver_env(OWNER, pipeline, 1)}
    sent: dict[str, Any] = json.loads(env[env_names.CONFIG]["value"])
    return sent


def test_fields_left_at_their_defaults_are_not_sent_to_the_driver() -> None:
    sent = config(spec())

    for field in ("standby", "upgrade", "suspend"):  # the test spec leaves them unset
        assert field not in sent, field


def test_a_field_the_spec_sets_is_sent_and_the_driver_reads_the_same_spec() -> None:
    pipeline = spec(standby=1, trigger={"intervalSeconds": 9})

    sent = config(pipeline)

    assert sent["standby"] == 1
    assert sent["trigger"]["intervalSeconds"] == 9
    assert PipelineSpec.model_validate(sent) == pipeline
    assert PipelineSpec.model_validate(config(spec())) == spec()


@pytest.mark.parametrize(
    "manifest",
    sorted(REPO_ROOT.glob("examples/**/*pipeline*.yaml")),
    ids=lambda path: path.relative_to(REPO_ROOT).as_posix(),
)
def test_every_example_reaches_its_driver_unchanged(manifest: Path) -> None:
    """Defaults left out, the driver's own model fills them in: the spec it reads is
    the one the operator read, for every shipped example (Kafka, Pub/Sub, Cassandra,
    Datastore, a custom image)."""
    (document,) = [d for d in yaml.safe_load_all(manifest.read_text()) if d and d.get("spec")]
    pipeline = PipelineSpec.model_validate(document["spec"])

    assert PipelineSpec.model_validate(config(pipeline)) == pipeline
