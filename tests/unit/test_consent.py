"""Secrets by consent (issue 22): a pipeline uses only Secrets the platform labelled.
Which Secrets a spec names, why one is refused, and what the operator does then:
no pod, no epoch, a condition and an Event naming the Secret and the label."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_operator.actions import CreatePod, Emit, WriteStatus
from sluice_operator.consent import DEFAULT, Label, Reference, references, refusals
from sluice_operator.decide import decide
from sluice_operator.model import Status
from tests.support.observations import SPEC, observed, spec

pytestmark = pytest.mark.unit


def full_spec() -> dict[str, Any]:
    return {
        **SPEC,
        "source": {
            "kafka": {
                **SPEC["source"]["kafka"],
                "security": {
                    "protocol": "SASL_SSL",
                    "sasl": {"credentialsSecret": "kafka-login"},
                    "tls": {"caSecret": "kafka-ca", "clientSecret": "kafka-client"},
                },
            },
        },
        "transform": {
            **SPEC["transform"],
            "optionsFrom": [{"option": "token", "secret": "api", "key": "t"}],
        },
        "checkpoint": {
            "cassandra": {
                **SPEC["checkpoint"]["cassandra"],
                "credentialsSecret": "cass",
                "tls": {"caSecret": "cass-ca"},
            }
        },
        "deadLetter": {
            "kafka": {
                "topic": "dlq",
                "bootstrapServers": "other:9093",
                "security": {"protocol": "SSL", "tls": {"clientSecret": "dlq-client"}},
            }
        },
        "spark": {
            "pod": {
                "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-one", "key": "k"}}},
                    {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
                ],
                "envFrom": [{"secretRef": {"name": "env-all", "optional": True}}],
                "volumes": [{"name": "ca", "secret": {"secretName": "ca-bundle"}}],
                "imagePullSecrets": ["registry"],
            }
        },
    }


def test_every_field_that_names_a_secret_is_found_and_configmaps_are_not() -> None:
    found = references(spec(**full_spec()))
    assert [(r.secret, r.where) for r in found] == [
        ("kafka-login", "source.kafka.security.sasl.credentialsSecret"),
        ("kafka-ca", "source.kafka.security.tls.caSecret"),
        ("kafka-client", "source.kafka.security.tls.clientSecret"),
        ("api", "transform.optionsFrom[0].secret"),
        ("cass", "checkpoint.cassandra.credentialsSecret"),
        ("cass-ca", "checkpoint.cassandra.tls.caSecret"),
        ("dlq-client", "deadLetter.kafka.security.tls.clientSecret"),
        ("env-one", "spark.pod.env[0].valueFrom"),
        ("env-all", "spark.pod.envFrom[0]"),
        ("ca-bundle", "spark.pod.volumes[0].secret"),
        ("registry", "spark.pod.imagePullSecrets[0]"),
    ]
    assert [r.secret for r in found if r.optional] == ["env-all"]


def test_a_secret_without_the_label_or_missing_is_refused_naming_it_and_the_label() -> None:
    refs = (
        Reference("ok", "a"),
        Reference("unlabelled", "sink.cassandra.credentialsSecret"),
        Reference("wrong-value", "b"),
        Reference("gone", "c"),
        Reference("gone-but-optional", "d", optional=True),
    )
    labels = {
        "ok": {"sluice.dev/usable": "true", "team": "a"},
        "unlabelled": {"team": "a"},
        "wrong-value": {"sluice.dev/usable": "false"},
        "gone": None,
        "gone-but-optional": None,
    }
    said = refusals(refs, labels, DEFAULT)
    assert len(said) == 3
    assert said[0].startswith("Secret 'unlabelled' (sink.cassandra.credentialsSecret) lacks")
    assert "sluice.dev/usable=true" in said[0]
    assert "'wrong-value'" in said[1]
    assert said[2].startswith("Secret 'gone' (c) does not exist")


def test_the_label_is_the_platforms_choice() -> None:
    label = Label.parse("example.com/pipelines")
    assert label is not None
    assert label.on({"example.com/pipelines": "anything"})
    assert not label.on({"sluice.dev/usable": "true"})
    assert Label.parse("") is None
    with pytest.raises(ValueError, match="key=value"):
        Label.parse("=true")


def test_a_refused_secret_creates_no_pod_and_uses_no_epoch_but_says_why() -> None:
    why = ("Secret 'cass' (checkpoint.cassandra.credentialsSecret) lacks the label x=y",)
    decision = decide(observed(Status(), secret_refusals=why))
    assert not any(isinstance(a, CreatePod) for a in decision.actions)
    status = next(a.status for a in decision.actions if isinstance(a, WriteStatus))
    assert (status.epoch, status.driver_pod) == (0, None)
    condition = next(c for c in status.conditions if c["type"] == "SecretsUsable")
    assert (condition["status"], condition["reason"]) == ("False", "NotLabelled")
    assert condition["message"] == why[0]
    events = [a for a in decision.actions if isinstance(a, Emit)]
    assert [(e.type, e.reason) for e in events] == [("Warning", "SecretNotUsable")]
    assert decision.requeue_after is not None  # it looks again by itself

    again = decide(observed(status, secret_refusals=why))
    assert not any(isinstance(a, Emit) for a in again.actions)  # one Event, not one a look

    labelled = decide(observed(status))
    assert any(isinstance(a, CreatePod) for a in labelled.actions)
    started = next(a.status for a in labelled.actions if isinstance(a, WriteStatus))
    condition = next(c for c in started.conditions if c["type"] == "SecretsUsable")
    assert condition["status"] == "True"
    assert started.epoch == 1
