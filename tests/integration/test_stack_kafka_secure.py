"""The broker's secure listeners work as a production cluster's would for a client of
Sluice: SASL_SSL takes a SCRAM user made at run time (any password) and turns away a
wrong password; the SSL listener takes a client certificate and turns away a client
without one. Clients trust the stack's CA through librdkafka's ``ssl.ca.pem``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.support import state
from tests.support.secure import KafkaSecure

pytestmark = pytest.mark.integration

DEADLINE_SECONDS = 30.0
AWKWARD_PASSWORD = "p\"a\\s's w0rd"


def test_scram_sha_512_user_with_awkward_password_produces_and_consumes(
    kafka_secure: KafkaSecure, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=1)
    user = f"scram-{uuid.uuid4().hex[:8]}"
    kafka_secure.add_scram_user(user, AWKWARD_PASSWORD, "SCRAM-SHA-512")
    config = kafka_secure.sasl_ssl_config(user, AWKWARD_PASSWORD, "SCRAM-SHA-512")

    produce(config, topic, [b"first", b"second"])

    assert [m.value() for m in state.consume(config, topic, 2)] == [b"first", b"second"]


def test_scram_sha_256_and_plain_users_are_accepted(
    kafka_secure: KafkaSecure, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=1)
    user = f"scram256-{uuid.uuid4().hex[:8]}"
    kafka_secure.add_scram_user(user, AWKWARD_PASSWORD, "SCRAM-SHA-256")

    produce(kafka_secure.sasl_ssl_config(user, AWKWARD_PASSWORD, "SCRAM-SHA-256"), topic, [b"a"])
    plain = kafka_secure.sasl_ssl_config(
        kafka_secure.plain_user, kafka_secure.plain_password, "PLAIN"
    )
    produce(plain, topic, [b"b"])

    assert [m.value() for m in state.consume(plain, topic, 2)] == [b"a", b"b"]


def test_wrong_password_is_an_authentication_error(kafka_secure: KafkaSecure) -> None:
    user = f"scram-{uuid.uuid4().hex[:8]}"
    kafka_secure.add_scram_user(user, AWKWARD_PASSWORD, "SCRAM-SHA-512")
    config = kafka_secure.sasl_ssl_config(user, AWKWARD_PASSWORD + "x", "SCRAM-SHA-512")

    error = first_client_error(config)

    assert error.code() == KafkaError._AUTHENTICATION, error
    assert "invalid credentials" in error.str()


def test_ssl_listener_takes_a_client_certificate(
    kafka_secure: KafkaSecure, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=1)
    config = kafka_secure.ssl_config(client_certificate=True)

    produce(config, topic, [b"mtls"])

    assert [m.value() for m in state.consume(config, topic, 1)] == [b"mtls"]


def test_ssl_listener_refuses_a_client_without_certificate(kafka_secure: KafkaSecure) -> None:
    error = first_client_error(kafka_secure.ssl_config(client_certificate=False))

    # The broker ends the handshake with a TLS "bad certificate" alert.
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT), error
    assert "certificate" in error.str()


def produce(config: dict[str, Any], topic: str, values: list[bytes]) -> None:
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer({**config, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value, on_delivery=on_delivery)
    assert producer.flush(DEADLINE_SECONDS) == 0, "records still queued after the deadline"
    assert failures == []


def first_client_error(config: dict[str, Any]) -> KafkaError:
    """The first error librdkafka reports for a client that only tries to connect."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "log_level": 0, "error_cb": errors.append})
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, f"no error within {DEADLINE_SECONDS:.0f}s: the listener let the client in"
    return errors[0]
