"""``sluice-dev pipeline apply`` of a Pub/Sub pipeline: the manifest pointed at the
stack's Pub/Sub server, and the topic, subscription and dead-letter topic made there
(the pure parts of ``sluice_dev.localrun``; the Kafka side is tested with the custom
transform, in ``test_imagebuild.py``)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from sluice_api.spec import PipelineSpec
from sluice_dev.localrun import (
    PubSubNames,
    localized,
    pubsub_names,
    subscription_topic,
    topic_subscription,
    topics,
)
from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.unit

EXAMPLE = REPO_ROOT / "examples" / "pubsub-kpi-pipeline.yaml"


def on_the_stack(manifest: dict[str, Any]) -> dict[str, Any]:
    return localized(
        manifest, namespace="sluice-demo", bootstrap="k:1", contact="c:2", pubsub="127.0.0.1:3"
    )


def test_the_pubsub_example_reads_the_stacks_server_with_its_project_and_subscription() -> None:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    body = on_the_stack(manifest)
    spec = PipelineSpec.model_validate(body["spec"])
    assert body["metadata"] == {"name": "page-kpis-pubsub", "namespace": "sluice-demo"}
    assert spec.source.pubsub is not None
    written = manifest["spec"]["source"]["pubsub"]
    assert (spec.source.pubsub.project, spec.source.pubsub.subscription) == (
        written["project"],
        written["subscription"],
    )
    assert spec.source.pubsub.endpoint == "127.0.0.1:3"
    # The stack's server is an emulator: plaintext, no key (with one the driver would
    # speak TLS to it), so no Secret is named either.
    assert spec.source.pubsub.credentials_secret is None
    assert "credentialsSecret" in written, "a copy"
    assert spec.sink.cassandra is not None
    assert spec.sink.cassandra.contact_points == ["c:2"]
    assert spec.checkpoint.cassandra.contact_points == ["c:2"]
    # The keyspace the driver creates: the manifest's datacenters are not the stack's.
    assert spec.checkpoint.cassandra.create_keyspace
    assert spec.checkpoint.cassandra.replication.cql() == (
        "{'class': 'SimpleStrategy', 'replication_factor': '1'}"
    )
    assert spec.dead_letter is not None
    assert spec.dead_letter.model_dump(exclude_none=True, by_alias=True) == {
        "pubsub": manifest["spec"]["deadLetter"]["pubsub"]
    }
    assert (spec.image, body["spec"]["transform"]) == (
        manifest["spec"]["image"],
        manifest["spec"]["transform"],
    )
    assert topics(body["spec"]) == ([], None), "no Kafka topic to create"


def test_the_stack_makes_the_examples_topic_subscription_and_dead_letter_topic() -> None:
    spec = on_the_stack(yaml.safe_load(EXAMPLE.read_text()))["spec"]
    assert pubsub_names(spec) == PubSubNames(
        project="my-gcp-project",
        topic="ui-events",
        subscription="ui-events-sub",
        ack_deadline_seconds=60,
        dead_letter=("my-gcp-project", "ui-events-dlq"),
    )


def test_a_subscription_is_made_on_the_topic_its_name_says() -> None:
    assert subscription_topic("ui-events-sub") == "ui-events"
    assert subscription_topic("clicks") == "clicks"
    assert subscription_topic("orders-sluice") == "orders-sluice"
    assert subscription_topic("a-sub-sub") == "a-sub"
    # Dead letters are kept in a subscription named the same way.
    assert topic_subscription("ui-events-dlq") == "ui-events-dlq-sub"
    assert subscription_topic(topic_subscription("ui-events-dlq")) == "ui-events-dlq"


def test_a_pubsub_source_with_its_defaults_a_dead_letter_project_and_a_kafka_dead_letter() -> None:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    source = manifest["spec"]["source"]["pubsub"]
    manifest["spec"]["source"]["pubsub"] = {k: source[k] for k in ("project", "subscription")}
    manifest["spec"]["deadLetter"] = {"pubsub": {"topic": "rejects", "project": "ops"}}
    names = pubsub_names(on_the_stack(manifest)["spec"])
    assert names is not None
    assert (names.ack_deadline_seconds, names.dead_letter) == (60, ("ops", "rejects"))

    manifest["spec"]["deadLetter"] = {"kafka": {"topic": "rejects"}}
    spec = on_the_stack(manifest)["spec"]
    # Kafka dead letters beside a Pub/Sub source need brokers of their own: the stack's.
    assert spec["deadLetter"]["kafka"] == {"topic": "rejects", "bootstrapServers": "k:1"}
    PipelineSpec.model_validate(spec)
    assert topics(spec) == ([], "rejects")
    names = pubsub_names(spec)
    assert names is not None
    assert names.dead_letter is None


def test_the_kafka_example_on_the_stack_has_no_pubsub_names() -> None:
    manifest = yaml.safe_load((REPO_ROOT / "examples" / "kpi-pipeline.yaml").read_text())
    spec = on_the_stack(manifest)["spec"]
    assert pubsub_names(spec) is None
    assert topics(spec) == (["ui-events"], "ui-events-dlq")
    assert "bootstrapServers" not in spec["deadLetter"]["kafka"], "the source's brokers"
    replication = PipelineSpec.model_validate(spec).checkpoint.cassandra.replication
    assert replication.cql() == "{'class': 'SimpleStrategy', 'replication_factor': '1'}"
    assert manifest["spec"]["checkpoint"]["cassandra"]["replication"]["datacenters"] == {
        "dc1": 3
    }, "a copy"
