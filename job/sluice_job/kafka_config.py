"""Kafka client settings for both clients the driver uses: librdkafka (watermarks,
dead letters, consumer-group commits) and the Java client inside Spark's Kafka
source. Their names differ for SASL and TLS, so both are built here from one
description. Pure functions.

The spec says the protocol and mechanism (``security``); secrets come from the
environment the operator fills from the Secrets it names (``<PREFIX>_USERNAME``,
``_PASSWORD``, ``_CA``, ``_CERT``, ``_KEY``; see ``sluice_api.secret_refs``). TLS
material is passed as PEM text to both clients, so no secret is ever written to a
file for Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice_api import env as names
from sluice_api.security import KafkaSecurity, SaslMechanism, SecurityProtocol
from sluice_job.cassandra_session import Credentials
from sluice_job.tls import TlsMaterial

LOGIN_MODULES = {
    SaslMechanism.PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SaslMechanism.SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaCredentialsError(Exception):
    """The spec asks for SASL but the username or password variable is empty."""


@dataclass(frozen=True)
class KafkaAccess:
    bootstrap_servers: str
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    mechanism: SaslMechanism = SaslMechanism.SCRAM_SHA_512
    credentials: Credentials | None = None
    tls: TlsMaterial | None = None

    @classmethod
    def of(
        cls, bootstrap_servers: str, security: KafkaSecurity, env: Mapping[str, str], prefix: str
    ) -> KafkaAccess:
        """Access to ``bootstrap_servers`` as ``security`` says, with the secrets under
        ``prefix`` in ``env``."""
        credentials = None
        if security.sasl is not None:
            credentials = Credentials.from_env(env, prefix)
            if credentials is None:
                raise KafkaCredentialsError(
                    f"{prefix}{names.USERNAME_SUFFIX} and {prefix}{names.PASSWORD_SUFFIX} must "
                    "be set: check the keys 'username' and 'password' of the Secret "
                    "security.sasl.credentialsSecret names"
                )
        tls = TlsMaterial.from_env(security.tls, env, prefix)
        if tls is None and security.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
            tls = TlsMaterial()
        mechanism = security.sasl.mechanism if security.sasl else SaslMechanism.SCRAM_SHA_512
        return cls(bootstrap_servers, security.protocol, mechanism, credentials, tls)

    def librdkafka(self) -> dict[str, str]:
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.protocol is SecurityProtocol.PLAINTEXT:
            return config
        config["security.protocol"] = self.protocol.value.lower()
        if self.credentials:
            config |= {
                "sasl.mechanism": self.mechanism.value,
                "sasl.username": self.credentials.username,
                "sasl.password": self.credentials.password,
            }
        if self.tls:
            verify = "https" if self.tls.verify_hostname else "none"
            config["ssl.endpoint.identification.algorithm"] = verify
            if self.tls.ca_pem:
                config["ssl.ca.pem"] = self.tls.ca_pem
            if self.tls.cert_pem and self.tls.key_pem:
                config["ssl.certificate.pem"] = self.tls.cert_pem
                config["ssl.key.pem"] = self.tls.key_pem
        return config

    def java(self) -> dict[str, str]:
        """Settings for Spark's Kafka source, without its ``kafka.`` prefix."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.protocol is SecurityProtocol.PLAINTEXT:
            return config
        config["security.protocol"] = self.protocol.value
        if self.credentials:
            module = LOGIN_MODULES[self.mechanism]
            user = jaas_quoted(self.credentials.username)
            password = jaas_quoted(self.credentials.password)
            config |= {
                "sasl.mechanism": self.mechanism.value,
                "sasl.jaas.config": f"{module} required username={user} password={password};",
            }
        if self.tls:
            config["ssl.endpoint.identification.algorithm"] = (
                "https" if self.tls.verify_hostname else ""
            )
            if self.tls.ca_pem:
                config["ssl.truststore.type"] = "PEM"
                config["ssl.truststore.certificates"] = self.tls.ca_pem
            if self.tls.cert_pem and self.tls.key_pem:
                config["ssl.keystore.type"] = "PEM"
                config["ssl.keystore.certificate.chain"] = self.tls.cert_pem
                config["ssl.keystore.key"] = self.tls.key_pem
        return config


def jaas_quoted(value: str) -> str:
    """``value`` as a JAAS option value: in double quotes, with ``\\`` and ``"`` escaped
    (Kafka parses JAAS text with :class:`java.io.StreamTokenizer`)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
