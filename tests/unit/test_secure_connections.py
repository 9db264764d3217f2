"""Secure connections (issue 14 item 5): what a manifest's ``security`` and ``tls``
fields turn into for the driver's two Kafka clients and its Cassandra sessions, and
which Secret keys reach the pod as which variables. The servers' side is in
tests/integration/test_secure_pipeline.py."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
from pydantic import ValidationError

from sluice_api import secret_refs
from sluice_api.security import KafkaSecurity
from sluice_job.kafka_config import KafkaAccess, KafkaCredentialsError, jaas_quoted
from sluice_job.tls import TlsMaterial, TlsMaterialError
from sluice_operator.builders import credential_env
from tests.support.observations import SPEC, spec

pytestmark = pytest.mark.unit

PASSWORD = "p\"a\\s's"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
SASL_SSL: dict[str, Any] = {
    "protocol": "SASL_SSL",
    "sasl": {"mechanism": "SCRAM-SHA-256", "credentialsSecret": "login"},
    "tls": {"caSecret": "ca", "clientSecret": "client"},
}
ENV = {
    "SLUICE_KAFKA_USERNAME": "alice",
    "SLUICE_KAFKA_PASSWORD": PASSWORD,
    "SLUICE_KAFKA_CA": CA,
    "SLUICE_KAFKA_CERT": CA,
    "SLUICE_KAFKA_KEY": KEY,
}


def access(security: dict[str, Any], env: dict[str, str] = ENV) -> KafkaAccess:
    return KafkaAccess.of("b:9094", KafkaSecurity.model_validate(security), env, "SLUICE_KAFKA")


def test_plaintext_sends_nothing_but_the_brokers() -> None:
    plain = access({})
    assert plain.librdkafka() == {"bootstrap.servers": "b:9094"}
    assert plain.java() == {"bootstrap.servers": "b:9094"}


def test_sasl_ssl_gives_both_clients_the_user_the_mechanism_and_pem_material() -> None:
    both = access(SASL_SSL)
    assert both.librdkafka() == {
        "bootstrap.servers": "b:9094",
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.pem": CA,
        "ssl.certificate.pem": CA,
        "ssl.key.pem": KEY,
    }
    java = both.java()
    assert java["security.protocol"] == "SASL_SSL"
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="p\\"a\\\\s\'s";'
    )
    assert (java["ssl.truststore.type"], java["ssl.truststore.certificates"]) == ("PEM", CA)
    assert (java["ssl.keystore.type"], java["ssl.keystore.key"]) == ("PEM", KEY)


def test_a_jaas_value_keeps_quotes_and_backslashes() -> None:
    assert jaas_quoted('a"b\\c') == '"a\\"b\\\\c"'


def test_tls_without_a_ca_trusts_the_system_and_can_skip_the_hostname_check() -> None:
    ssl_only = access({"protocol": "SSL", "tls": {"verifyHostname": False}}, {})
    assert ssl_only.librdkafka() == {
        "bootstrap.servers": "b:9094",
        "security.protocol": "ssl",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert ssl_only.java()["ssl.endpoint.identification.algorithm"] == ""
    assert access({"protocol": "SSL"}, {}).tls == TlsMaterial()


def test_missing_secret_values_name_the_variable_and_the_secret_field() -> None:
    with pytest.raises(KafkaCredentialsError, match=r"SLUICE_KAFKA_USERNAME.*credentialsSecret"):
        access(SASL_SSL, {})
    with pytest.raises(TlsMaterialError, match="SLUICE_KAFKA_CA is empty"):
        access(SASL_SSL, {**ENV, "SLUICE_KAFKA_CA": ""})
    with pytest.raises(TlsMaterialError, match="SLUICE_KAFKA_KEY is not PEM"):
        access(SASL_SSL, {**ENV, "SLUICE_KAFKA_KEY": "hunter2"})


@pytest.mark.parametrize(
    ("security", "message"),
    [
        ({"protocol": "SASL_SSL"}, "needs sasl"),
        ({"sasl": {"credentialsSecret": "x"}}, "does not use SASL"),
        ({"protocol": "SASL_PLAINTEXT", "sasl": {"credentialsSecret": "x"}, "tls": {}}, "TLS"),
        ({"protocol": "SSL", "sasl": {"mechanism": "GSSAPI", "credentialsSecret": "x"}}, "PLAIN"),
    ],
)
def test_inconsistent_security_is_refused_naming_the_field(
    security: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        KafkaSecurity.model_validate(security)


def test_the_key_never_shows_in_a_repr() -> None:
    material = TlsMaterial(CA, CA, KEY)
    assert "PRIVATE" not in repr(material)
    assert "MIIE" not in repr(material)
    assert PASSWORD not in repr(access(SASL_SSL))


def test_the_context_trusts_the_ca_checks_names_and_presents_the_client_certificate() -> None:
    ca, cert, key = _self_signed("sluice-test-ca")
    context = TlsMaterial(ca, cert, key).ssl_context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    subjects = [dict(item[0] for item in c["subject"]) for c in context.get_ca_certs()]
    assert {"commonName": "sluice-test-ca"} in subjects
    assert not TlsMaterial(ca, verify_hostname=False).ssl_context().check_hostname
    with pytest.raises(ssl.SSLError):
        TlsMaterial(CA).ssl_context()  # not a certificate: refused at start, not at connect


def _self_signed(name: str) -> tuple[str, str, str]:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return pem, pem, key_pem


def pipeline(**kafka_dead_letter: Any) -> Any:
    return spec(
        source={"kafka": {**SPEC["source"]["kafka"], "security": SASL_SSL}},
        deadLetter={"kafka": {"topic": "dlq", **kafka_dead_letter}},
    )


def test_dead_letters_on_the_same_brokers_use_the_sources_secrets() -> None:
    same = pipeline()
    assert secret_refs.dead_letter_prefix(same) == "SLUICE_KAFKA"
    assert not any(v.startswith("SLUICE_DLQ") for v in _variables(same))


def test_the_sources_credentials_never_go_to_other_dead_letter_brokers() -> None:
    elsewhere = pipeline(bootstrapServers="other:9092")
    assert secret_refs.dead_letter_prefix(elsewhere) is None
    assert elsewhere.dead_letter is not None
    assert elsewhere.dead_letter.kafka.security_with(elsewhere.source.kafka) == KafkaSecurity()
    own = pipeline(
        bootstrapServers="other:9092",
        security={"protocol": "SASL_PLAINTEXT", "sasl": {"credentialsSecret": "dlq-login"}},
    )
    assert secret_refs.dead_letter_prefix(own) == "SLUICE_DLQ_KAFKA"
    assert {"SLUICE_DLQ_KAFKA_USERNAME", "SLUICE_DLQ_KAFKA_PASSWORD"} <= _variables(own)


def test_every_secret_arrives_by_reference_never_by_value() -> None:
    full = spec(
        source={"kafka": {**SPEC["source"]["kafka"], "security": SASL_SSL}},
        sink={
            "cassandra": {
                **SPEC["sink"]["cassandra"],
                "credentialsSecret": "writer",
                "tls": {"caSecret": "cass-ca", "clientSecret": "cass-client"},
            }
        },
    )
    env = credential_env(full)
    assert all("value" not in item for item in env)
    refs = {
        e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in env
    }
    assert refs["SLUICE_KAFKA_CA"] == ("ca", "ca.crt")
    assert refs["SLUICE_KAFKA_KEY"] == ("client", "tls.key")
    assert refs["SLUICE_SINK_CASSANDRA_PASSWORD"] == ("writer", "password")
    assert refs["SLUICE_SINK_CASSANDRA_CERT"] == ("cass-client", "tls.crt")


def _variables(pipeline_spec: Any) -> set[str]:
    return {item["name"] for item in credential_env(pipeline_spec)}
