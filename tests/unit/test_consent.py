"""Secrets by consent (issue 22): a pipeline uses only Secrets the platform labelled,
and sends their values only where their ``sluice.dev/allowed-endpoints`` annotation
allows. Which Secrets a spec names and where it sends them, why one is refused, and
what the operator does then: no pod, no epoch, a condition and an Event naming the
Secret and the label, or the field, the endpoint and the annotation."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sluice_operator.actions import CreatePod, Emit, WriteStatus
from sluice_operator.consent import (
    DEFAULT,
    ENDPOINTS_ANNOTATION,
    TOKEN_ANNOTATION,
    TOKEN_TYPE,
    Label,
    Reference,
    SecretMeta,
    deliveries,
    endpoint_refusals,
    parse_allowed,
    parse_endpoint,
    references,
    refusals,
    token_refusals,
)
from sluice_operator.decide import decide
from sluice_operator.kube import secret_meta
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
    assert len(said) == 4
    assert said[0].startswith("Secret 'unlabelled' (sink.cassandra.credentialsSecret) lacks")
    assert "sluice.dev/usable=true" in said[0]
    assert "'wrong-value'" in said[1]
    assert said[2].startswith("Secret 'gone' (c) does not exist")
    # Issue 38, finding 8: an optional reference to a missing Secret passed, and a
    # Secret created later without the label would have been mounted.
    assert said[3].startswith("Secret 'gone-but-optional' (d) does not exist (the reference is")


def test_a_service_account_token_is_refused_labelled_or_not() -> None:
    """Issue 38, finding 2: a tenant creates a Secret of type
    kubernetes.io/service-account-token naming the operator's ServiceAccount, with the
    consent label; the token controller fills it in and consent (labels only) let a
    pipeline mount it. Now the type, or the annotation alone, refuses it."""
    refs = (
        Reference("minted", "spark.pod.volumes[0].secret"),
        Reference("annotated", "spark.pod.envFrom[0]"),
        Reference("tls", "b"),
        Reference("fine", "c"),
        Reference("gone", "d"),
    )
    usable = {"sluice.dev/usable": "true"}
    found = {
        "minted": SecretMeta(usable, {}, TOKEN_TYPE),
        "annotated": SecretMeta(usable, {TOKEN_ANNOTATION: "sluice"}, "Opaque"),
        "tls": SecretMeta(usable, {}, "kubernetes.io/tls"),
        "fine": SecretMeta(usable, {}, "Opaque"),
        "gone": None,
    }
    said = token_refusals(refs, found)
    assert list(said) == ["minted", "annotated"]
    assert said["minted"].startswith("Secret 'minted' (spark.pod.volumes[0].secret) is a ")
    assert "of sluice" in said["annotated"]
    assert list(token_refusals(refs, found, frozenset({"kubernetes.io/tls"}))) == [
        "minted",
        "annotated",
        "tls",
    ]


def test_a_secrets_type_and_metadata_are_read_from_its_table_form() -> None:
    table = {
        "kind": "Table",
        "columnDefinitions": [{"name": "Name"}, {"name": "Type"}, {"name": "Data"}],
        "rows": [
            {
                "cells": ["minted", TOKEN_TYPE, 3],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}},
                },
            }
        ],
    }
    assert secret_meta(table) == SecretMeta({"a": "b"}, {"c": "d"}, TOKEN_TYPE)


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


# -- where a Secret's value may go (sluice.dev/allowed-endpoints) ---------------------

ANNOTATION = ENDPOINTS_ANNOTATION


@pytest.mark.parametrize(
    ("allowed", "endpoint", "default_port", "admitted"),
    [
        ("kafka.example.com", "kafka.example.com:9093", 9092, True),  # any port
        ("kafka.example.com:9093", "kafka.example.com:9093", 9092, True),
        ("kafka.example.com:9093", "kafka.example.com:9094", 9092, False),
        ("kafka.example.com:9092", "kafka.example.com", 9092, True),  # the default port
        ("cassandra.example.com:9042", "cassandra.example.com", 9042, True),
        ("cassandra.example.com:9043", "cassandra.example.com", 9042, False),
        ("Kafka.Example.COM", "kafka.example.com:1", 9092, True),  # case
        ("kafka.example.com", "KAFKA.example.com:1", 9092, True),
        ("kafka.example.com.", "kafka.example.com", 9092, True),  # a trailing dot
        ("kafka.example.com", "kafka.example.com.:9092", 9092, True),
        ("kafka.example.com", "kafka.example.com.evil.io", 9092, False),
        ("kafka.example.com", "evilkafka.example.com", 9092, False),
        ("*.example.com", "b-1.kafka.example.com:9092", 9092, True),  # any depth
        ("*.example.com", "kafka.example.com", 9092, True),
        ("*.example.com", "example.com", 9092, False),  # not the domain itself
        ("*.example.com", "kafka.example.com.evil.io", 9092, False),
        ("*.example.com", "kafkaexample.com", 9092, False),
        ("*.example.com:9093", "kafka.example.com:9092", 9092, False),
        ("*.example.com:9093", "kafka.example.com:9093", 9092, True),
        ("*", "anything.anywhere:1", 9092, True),
        ("*:9092", "anything.anywhere:1", 9092, False),
        ("10.0.0.7", "10.0.0.7:9042", 9042, True),
        ("10.0.0.7:9042", "10.0.0.8:9042", 9042, False),
        ("*.0.0.7", "10.0.0.7", 9042, False),  # a wildcard names hosts, not addresses
        ("[2001:db8::1]:9092", "[2001:DB8:0::1]:9092", 9092, True),  # IPv6, canonical
        ("[2001:db8::1]", "[2001:db8::1]:1234", 9092, True),
        ("2001:db8::1", "[2001:db8::1]:1234", 9092, True),  # bare: any port
        ("[2001:db8::1]:9092", "[2001:db8::2]:9092", 9092, False),
        ("[2001:db8::1]:9092", "2001:db8::1", 9092, True),  # bare endpoint: default port
        ("kafka.example.com", "SASL_SSL://kafka.example.com:9093", 9092, True),
        ("a.example.com, b.example.com:9093", "b.example.com:9093", 9092, True),
        ("a.example.com,,b.example.com", "b.example.com", 9092, True),
        ("", "kafka.example.com", 9092, False),  # empty: nowhere
    ],
)
def test_an_endpoint_is_admitted_as_the_annotation_says(
    allowed: str, endpoint: str, default_port: int, admitted: bool
) -> None:
    host, port = parse_endpoint(endpoint, default_port)
    assert any(a.admits(host, port) for a in parse_allowed(allowed)) is admitted


@pytest.mark.parametrize(
    ("allowed", "says"),
    [
        ("kafka-*.example.com", "is not"),
        ("*example.com", "is not"),
        ("*.*.example.com", "is not"),
        ("https://kafka.example.com", "port"),
        ("kafka.example.com:0", "port '0'"),
        ("kafka.example.com:65536", "port '65536'"),
        ("kafka.example.com:x", "port 'x'"),
        ("[2001:db8::1", "[address]"),
        ("[not-v6]:9092", "not an IPv6 address"),
        ("2001:db8::zz:9092", "[address]:port"),
        ("*.10.0.0.7", "not addresses"),
        ("kafka example.com", "is not"),
    ],
)
def test_an_annotation_that_cannot_be_read_is_refused_naming_the_entry(
    allowed: str, says: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_allowed(allowed)


def secured_spec() -> dict[str, Any]:
    """Every connection with a login: Kafka SASL (source and dead letters), the
    Cassandra sink and checkpoint store, with TLS on the source."""
    return {
        **SPEC,
        "source": {
            "kafka": {
                "bootstrapServers": "b-1.kafka.example.com:9096, b-2.kafka.example.com:9096",
                "topics": ["t"],
                "security": {
                    "protocol": "SASL_SSL",
                    "sasl": {"credentialsSecret": "kafka-login"},
                    "tls": {"caSecret": "kafka-ca"},
                },
            }
        },
        "sink": {
            "cassandra": {
                "contactPoints": ["cass-1.example.com", "10.0.0.7:9142"],
                "keyspace": "a",
                "table": "t",
                "credentialsSecret": "sink-login",
            }
        },
        "checkpoint": {
            "cassandra": {"contactPoints": ["ckpt.example.com"], "credentialsSecret": "ckpt-login"}
        },
        "deadLetter": {
            "kafka": {
                "topic": "dlq",
                "bootstrapServers": "dlq.example.com:9096",
                "security": {"protocol": "SASL_SSL", "sasl": {"credentialsSecret": "dlq-login"}},
            }
        },
    }


def test_every_connection_that_uses_a_secret_names_its_endpoints() -> None:
    found = deliveries(spec(**secured_spec()))
    assert [(d.secret, d.where, d.field, d.endpoints, d.default_port, d.sent) for d in found] == [
        (
            "kafka-login",
            "source.kafka.security.sasl.credentialsSecret",
            "source.kafka.bootstrapServers",
            ("b-1.kafka.example.com:9096", "b-2.kafka.example.com:9096"),
            9092,
            True,
        ),
        (
            "kafka-ca",
            "source.kafka.security.tls.caSecret",
            "source.kafka.bootstrapServers",
            ("b-1.kafka.example.com:9096", "b-2.kafka.example.com:9096"),
            9092,
            False,
        ),
        (
            "sink-login",
            "sink.cassandra.credentialsSecret",
            "sink.cassandra.contactPoints",
            ("cass-1.example.com", "10.0.0.7:9142"),
            9042,
            True,
        ),
        (
            "ckpt-login",
            "checkpoint.cassandra.credentialsSecret",
            "checkpoint.cassandra.contactPoints",
            ("ckpt.example.com",),
            9042,
            True,
        ),
        (
            "dlq-login",
            "deadLetter.kafka.security.sasl.credentialsSecret",
            "deadLetter.kafka.bootstrapServers",
            ("dlq.example.com:9096",),
            9092,
            True,
        ),
    ]
    datastore = {
        **SPEC,
        "sink": {"datastore": {"project": "p", "kind": "k", "credentialsSecret": "gcp-key"}},
    }
    [key] = [d for d in deliveries(spec(**datastore)) if d.secret == "gcp-key"]
    assert (key.endpoints, key.sent) == (("datastore.googleapis.com:443",), True)
    pubsub = {"project": "p1", "subscription": "sub", "credentialsSecret": "ps-key"}
    for source, endpoint in (
        (pubsub, "pubsub.googleapis.com:443"),
        ({**pubsub, "endpoint": "ps.internal:8443"}, "ps.internal:8443"),
    ):
        from_pubsub = {**SPEC, "source": {"pubsub": source}, "deadLetter": None}
        [key] = [d for d in deliveries(spec(**from_pubsub)) if d.secret == "ps-key"]
        assert (key.where, key.endpoints, key.sent) == (
            "source.pubsub.credentialsSecret",
            (endpoint,),
            True,
        )


def refusals_for(
    raw: dict[str, Any], annotations: dict[str, dict[str, str]], *, require: bool = False
) -> tuple[str, ...]:
    parsed = spec(**raw)
    refs = references(parsed)
    metadata = {r.secret: SecretMeta({}, annotations.get(r.secret, {})) for r in refs}
    return endpoint_refusals(refs, deliveries(parsed), metadata, require=require)


def test_a_secret_goes_only_where_its_annotation_allows_naming_secret_field_endpoint() -> None:
    allowed = {
        "kafka-login": {ANNOTATION: "*.kafka.example.com:9096"},
        "sink-login": {ANNOTATION: "cass-1.example.com:9042, 10.0.0.7"},
        "ckpt-login": {ANNOTATION: "ckpt.example.com"},
        "dlq-login": {ANNOTATION: "dlq.example.com:9096"},
    }
    assert refusals_for(secured_spec(), allowed) == ()
    hostile = secured_spec()
    hostile["sink"]["cassandra"]["contactPoints"] = ["cass-1.example.com", "collector.evil.io"]
    [said] = refusals_for(hostile, allowed)
    assert said == (
        "Secret 'sink-login' (sink.cassandra.credentialsSecret) may not be sent to "
        "collector.evil.io (sink.cassandra.contactPoints): its annotation "
        f"{ANNOTATION} allows cass-1.example.com:9042, 10.0.0.7"
    )


def test_without_the_annotation_a_secret_goes_anywhere_unless_the_platform_requires_it() -> None:
    assert refusals_for(secured_spec(), {}) == ()
    required = refusals_for(secured_spec(), {}, require=True)
    assert [line.split(" (")[0] for line in required] == [
        "Secret 'kafka-login'",
        "Secret 'sink-login'",
        "Secret 'ckpt-login'",
        "Secret 'dlq-login'",
    ]  # not the CA: TLS material is never sent
    assert f"has no annotation {ANNOTATION}" in required[0]
    assert "b-1.kafka.example.com:9096" in required[0]


def test_tls_material_is_held_to_its_annotation_when_it_has_one() -> None:
    [said] = refusals_for(secured_spec(), {"kafka-ca": {ANNOTATION: "kafka.example.com"}})
    assert said.startswith("Secret 'kafka-ca' (source.kafka.security.tls.caSecret) may not be")
    assert "b-1.kafka.example.com:9096, b-2.kafka.example.com:9096" in said


def test_a_dead_letter_login_on_the_sources_brokers_is_held_to_those() -> None:
    raw = secured_spec()
    del raw["deadLetter"]["kafka"]["bootstrapServers"]
    [said] = refusals_for(raw, {"dlq-login": {ANNOTATION: "dlq.example.com"}})
    assert "(source.kafka.bootstrapServers)" in said
    assert said.startswith("Secret 'dlq-login' (deadLetter.kafka.security.sasl.credentialsSecret)")


def test_an_unreadable_annotation_or_endpoint_refuses_the_secret() -> None:
    [bad] = refusals_for(secured_spec(), {"ckpt-login": {ANNOTATION: "ckpt-*.example.com"}})
    assert bad.startswith(
        f"Secret 'ckpt-login' (checkpoint.cassandra.credentialsSecret): its "
        f"annotation {ANNOTATION} is not"
    )
    assert "'ckpt-*.example.com'" in bad
    raw = secured_spec()
    raw["source"]["kafka"]["bootstrapServers"] = "[2001:db8::1:9096"
    [unknown] = refusals_for(raw, {"kafka-login": {ANNOTATION: "*"}})
    assert "may not be sent to [2001:db8::1:9096 (source.kafka.bootstrapServers)" in unknown


def test_an_annotated_secret_is_not_handed_to_the_pipelines_own_code() -> None:
    raw = {
        **SPEC,
        "transform": {
            **SPEC["transform"],
            "optionsFrom": [{"option": "token", "secret": "api", "key": "t"}],
        },
    }
    raw["spark"] = {"pod": {"envFrom": [{"secretRef": {"name": "api"}}]}}
    said = refusals_for(raw, {"api": {ANNOTATION: "api.example.com"}})
    assert [line.split(" carries")[0] for line in said] == [
        "Secret 'api' (transform.optionsFrom[0].secret)",
        "Secret 'api' (spark.pod.envFrom[0])",
    ]
    assert refusals_for(raw, {}, require=True) == ()  # no connection of the operator's


def test_a_secret_sent_where_it_may_not_go_creates_no_pod_and_says_why() -> None:
    why = ("Secret 'cass' (checkpoint.cassandra.credentialsSecret) may not be sent to x:1",)
    decision = decide(observed(Status(), endpoint_refusals=why))
    assert not any(isinstance(a, CreatePod) for a in decision.actions)
    status = next(a.status for a in decision.actions if isinstance(a, WriteStatus))
    condition = next(c for c in status.conditions if c["type"] == "SecretsUsable")
    assert (condition["status"], condition["reason"]) == ("False", "EndpointNotAllowed")
    assert condition["message"] == why[0]
    assert decision.requeue_after is not None
    allowed = decide(observed(status))
    assert any(isinstance(a, CreatePod) for a in allowed.actions)
