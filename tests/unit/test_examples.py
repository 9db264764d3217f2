"""The manifests under examples/ are valid pipelines that name real transforms."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from sluice_api.spec import PipelineSpec
from sluice_dev.oci.dockerfile import parse
from sluice_dev.paths import REPO_ROOT
from sluice_operator import consent, naming

pytestmark = pytest.mark.unit

MANIFESTS = sorted((REPO_ROOT / "examples").glob("*.yaml"))


def test_the_examples_hold_a_cassandra_and_a_datastore_pipeline() -> None:
    sinks = {next(iter(yaml.safe_load(p.read_text())["spec"]["sink"])) for p in MANIFESTS}
    assert sinks == {"cassandra", "datastore"}


def test_the_examples_read_from_kafka_and_from_pubsub() -> None:
    sources = {next(iter(yaml.safe_load(p.read_text())["spec"]["source"])) for p in MANIFESTS}
    assert sources == {"kafka", "pubsub"}


def test_the_pubsub_example_is_the_kpi_pipeline_reading_a_subscription() -> None:
    kafka, pubsub = (
        yaml.safe_load((REPO_ROOT / "examples" / name).read_text())["spec"]
        for name in ("kpi-pipeline.yaml", "pubsub-kpi-pipeline.yaml")
    )
    assert (pubsub["transform"], pubsub["sink"]) == (kafka["transform"], kafka["sink"])
    spec = PipelineSpec.model_validate(pubsub)
    assert spec.source.pubsub is not None
    assert spec.source.pubsub.credentials_secret, "the key from a Secret"
    assert spec.dead_letter is not None
    assert spec.dead_letter.pubsub is not None, "dead letters to a Pub/Sub topic"


def test_the_secret_made_as_the_pubsub_examples_header_says_lets_the_pipeline_start() -> None:
    """The header's ``kubectl label`` and ``kubectl annotate`` give the key consent
    and keep it to where the source sends it: the operator refuses nothing."""
    path = REPO_ROOT / "examples" / "pubsub-kpi-pipeline.yaml"
    header = " ".join(line.lstrip("# ").rstrip("\\ ") for line in path.read_text().splitlines())
    spec = PipelineSpec.model_validate(yaml.safe_load(path.read_text())["spec"])
    secret = spec.source.pubsub.credentials_secret if spec.source.pubsub else None
    assert f"create secret generic {secret} --from-file=credentials.json=" in header
    label = re.search(rf"label secret {secret} (\S+)", header)
    annotation = re.search(
        rf"annotate secret {secret} {consent.ENDPOINTS_ANNOTATION}=(\S+)", header
    )
    assert label, header
    assert annotation, header
    key, _, value = label.group(1).partition("=")
    assert consent.Label(key, value) == consent.DEFAULT
    meta = consent.SecretMeta(
        labels={key: value}, annotations={consent.ENDPOINTS_ANNOTATION: annotation.group(1)}
    )
    refs, sent = consent.references(spec), consent.deliveries(spec)
    assert {r.secret for r in refs} == {secret}
    assert consent.refusals(refs, {secret: meta.labels}, consent.DEFAULT) == ()
    assert consent.endpoint_refusals(refs, sent, {secret: meta}, require=True) == ()


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
