"""How the driver's connections are secured: TLS towards a server, and Kafka's
security protocol with its SASL user.

The same models serve the Kafka source (``source.kafka.security``), the Kafka dead
letters (``deadLetter.kafka.security``) and the Cassandra connections (``tls``), so
they live apart from any one of them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import Field, model_validator

from sluice_api.spec_base import Model, SecretName


class Tls(Model):
    """TLS towards a server: whom to trust and, if the server asks, who the client is."""

    ca_secret: SecretName | None = Field(
        default=None,
        description=(
            "Secret whose key 'ca.crt' holds the PEM certificates that sign the servers' "
            "certificates (a cert-manager Secret has it); default: the image's trusted CAs."
        ),
    )
    client_secret: SecretName | None = Field(
        default=None,
        description=(
            "Secret with keys 'tls.crt' and 'tls.key' (a kubernetes.io/tls Secret, key in "
            "PKCS#8 PEM, unencrypted): the client certificate, for servers that require one."
        ),
    )
    verify_hostname: bool = Field(
        default=True,
        description=(
            "Check that the server's certificate names the address the driver connected "
            "to. Turn off only for servers whose certificates lack their addresses."
        ),
    )


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class KafkaSasl(Model):
    mechanism: SaslMechanism = Field(
        default=SaslMechanism.SCRAM_SHA_512, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."
    )
    credentials_secret: SecretName = Field(
        description="Secret with keys 'username' and 'password' of the SASL user."
    )


class KafkaSecurity(Model):
    """Kafka's ``security.protocol`` and what it needs, for both of the driver's clients
    (the Java client inside Spark, librdkafka for offsets and dead letters)."""

    protocol: SecurityProtocol = Field(
        default=SecurityProtocol.PLAINTEXT,
        description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's security.protocol).",
    )
    sasl: KafkaSasl | None = Field(
        default=None, description="SASL user and mechanism (SASL_PLAINTEXT and SASL_SSL)."
    )
    tls: Tls | None = Field(
        default=None,
        description="CA and client certificate (SSL and SASL_SSL); default: the image's CAs.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        sasl = self.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
        tls = self.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
        if sasl and self.sasl is None:
            raise ValueError(f"protocol {self.protocol.value} needs sasl (credentialsSecret)")
        if not sasl and self.sasl is not None:
            raise ValueError(f"sasl is set but protocol {self.protocol.value} does not use SASL")
        if not tls and self.tls is not None:
            raise ValueError(f"tls is set but protocol {self.protocol.value} does not use TLS")
        return self
