"""Which Secret keys a pipeline's connections use, and the variable each arrives in.

The operator turns these into ``secretKeyRef`` environment variables of the driver
container and checks each Secret's consent label; the driver reads the same
variables back. Both take the list from here, so a new credential cannot reach one
side only. Pure: the spec in, names out; no values are ever read here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sluice_api import env as names
from sluice_api.security import KafkaSecurity, Tls
from sluice_api.spec import PipelineSpec

CA_KEY = "ca.crt"
CERT_KEY = "tls.crt"
KEY_KEY = "tls.key"
SERVICE_ACCOUNT_KEY = "credentials.json"


@dataclass(frozen=True)
class SecretUse:
    """One key of one Secret, delivered as one environment variable."""

    variable: str
    secret: str
    key: str
    where: str
    """The spec field that names the Secret, as a user writes it."""


def dead_letter_prefix(spec: PipelineSpec) -> str | None:
    """The variable prefix of the dead-letter producer's secrets: the source's when it
    inherits the source's security, its own when it has one, ``None`` without either."""
    target = spec.kafka_dead_letter
    if target is None:
        return None
    if target.security is not None:
        return names.DEAD_LETTER_KAFKA_CREDENTIALS
    if target.bootstrap_servers is None:
        return names.KAFKA_CREDENTIALS
    return None


def uses(spec: PipelineSpec) -> tuple[SecretUse, ...]:
    """Every Secret key the spec's connections and secret options need, in spec order."""
    return tuple(_uses(spec))


def _uses(spec: PipelineSpec) -> Iterator[SecretUse]:
    if spec.source.kafka is not None:
        security = spec.source.kafka.security
        yield from _kafka(names.KAFKA_CREDENTIALS, security, "source.kafka.security")
    if spec.source.pubsub is not None and spec.source.pubsub.credentials_secret:
        yield SecretUse(
            names.PUBSUB_CREDENTIALS,
            spec.source.pubsub.credentials_secret,
            SERVICE_ACCOUNT_KEY,
            "source.pubsub.credentialsSecret",
        )
    for i, option in enumerate(spec.transform.options_from):
        where = f"transform.optionsFrom[{i}].secret"
        yield SecretUse(names.OPTION_PREFIX + option.option, option.secret, option.key, where)
    if spec.sink.cassandra is not None:
        sink = spec.sink.cassandra
        yield from _cassandra(
            names.SINK_CASSANDRA_CREDENTIALS, sink.credentials_secret, sink.tls, "sink.cassandra"
        )
    if spec.sink.datastore is not None and spec.sink.datastore.credentials_secret:
        yield SecretUse(
            names.SINK_DATASTORE_CREDENTIALS,
            spec.sink.datastore.credentials_secret,
            SERVICE_ACCOUNT_KEY,
            "sink.datastore.credentialsSecret",
        )
    checkpoint = spec.checkpoint.cassandra
    yield from _cassandra(
        names.CHECKPOINT_CASSANDRA_CREDENTIALS,
        checkpoint.credentials_secret,
        checkpoint.tls,
        "checkpoint.cassandra",
    )
    dead_letter = spec.kafka_dead_letter
    if dead_letter is not None and dead_letter.security is not None:
        yield from _kafka(
            names.DEAD_LETTER_KAFKA_CREDENTIALS,
            dead_letter.security,
            "deadLetter.kafka.security",
        )


def _kafka(prefix: str, security: KafkaSecurity, where: str) -> Iterator[SecretUse]:
    if security.sasl is not None:
        yield from _login(prefix, security.sasl.credentials_secret, f"{where}.sasl")
    if security.tls is not None:
        yield from _tls(prefix, security.tls, f"{where}.tls")


def _cassandra(prefix: str, login: str | None, tls: Tls | None, where: str) -> Iterator[SecretUse]:
    if login:
        yield from _login(prefix, login, where)
    if tls is not None:
        yield from _tls(prefix, tls, f"{where}.tls")


def _login(prefix: str, secret: str, where: str) -> Iterator[SecretUse]:
    field = f"{where}.credentialsSecret"
    yield SecretUse(prefix + names.USERNAME_SUFFIX, secret, "username", field)
    yield SecretUse(prefix + names.PASSWORD_SUFFIX, secret, "password", field)


def _tls(prefix: str, tls: Tls, where: str) -> Iterator[SecretUse]:
    if tls.ca_secret:
        yield SecretUse(prefix + names.CA_SUFFIX, tls.ca_secret, CA_KEY, f"{where}.caSecret")
    if tls.client_secret:
        field = f"{where}.clientSecret"
        yield SecretUse(prefix + names.CERT_SUFFIX, tls.client_secret, CERT_KEY, field)
        yield SecretUse(prefix + names.KEY_SUFFIX, tls.client_secret, KEY_KEY, field)
