"""What a test needs to reach the stack's secure endpoints, as a client outside the
stack would get it: addresses, the CA and client certificate as PEM text, and the
credentials (or a way to make them).

``kafka_secure`` and ``cassandra_secure`` in ``tests/support/fixtures.py`` build
these from the running servers; tests pass the PEM strings on as a pipeline's
secret would (librdkafka's ``ssl.ca.pem``, an ``ssl.SSLContext``).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

AddScramUser = Callable[[str, str, str], None]
"""``add_scram_user(name, password, mechanism)``; mechanism ``SCRAM-SHA-256`` or
``SCRAM-SHA-512``."""

CreateRole = Callable[[str, str, str, Iterable[str]], None]
"""``create_role(name, password, keyspace, permissions)``: a login role granted
``permissions`` (``SELECT``, ``MODIFY``, ...) on ``keyspace`` and nothing else."""


@dataclass(frozen=True)
class KafkaSecure:
    """The broker's ``SASL_SSL`` and ``SSL`` (client certificate required) listeners."""

    sasl_ssl_bootstrap: str
    ssl_bootstrap: str
    ca_pem: str
    client_cert_pem: str
    client_key_pem: str
    plain_user: str
    plain_password: str
    add_scram_user: AddScramUser

    def sasl_ssl_config(
        self, user: str, password: str, mechanism: str = "SCRAM-SHA-512"
    ) -> dict[str, Any]:
        """librdkafka settings for the ``SASL_SSL`` listener as ``user``."""
        return {
            "bootstrap.servers": self.sasl_ssl_bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.pem": self.ca_pem,
        }

    def ssl_config(self, *, client_certificate: bool = True) -> dict[str, Any]:
        """librdkafka settings for the ``SSL`` listener, with or without the client
        certificate it requires."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.ssl_bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.pem": self.ca_pem,
        }
        if client_certificate:
            config["ssl.certificate.pem"] = self.client_cert_pem
            config["ssl.key.pem"] = self.client_key_pem
        return config


@dataclass(frozen=True)
class CassandraSecure:
    """The ``cassandra-secure`` node: TLS required, password authentication,
    permissions enforced. ``admin`` is a session of the superuser."""

    contact: str
    superuser: str
    superuser_password: str
    ca_pem: str
    client_cert_pem: str
    client_key_pem: str
    create_role: CreateRole
    admin: Any

    @property
    def host(self) -> str:
        return self.contact.rpartition(":")[0]

    @property
    def port(self) -> int:
        return int(self.contact.rpartition(":")[2])

    def cluster(self, user: str | None, password: str | None, *, tls: bool = True) -> Any:
        """A driver ``Cluster`` for this node (not connected): with TLS unless
        ``tls=False``, with a password unless ``user`` is ``None``."""
        return cassandra_cluster(self.contact, self.ca_pem, user, password, tls=tls)


def cassandra_cluster(
    contact: str, ca_pem: str, user: str | None, password: str | None, *, tls: bool = True
) -> Any:
    """A driver ``Cluster`` for the node at ``contact`` (``host:port``), trusting
    ``ca_pem`` and checking the server's name when ``tls``."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy

    from sluice_dev.servers.cassandra import DATACENTER

    host, _, port = contact.rpartition(":")
    profile = ExecutionProfile(
        load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=DATACENTER), request_timeout=30
    )
    options: dict[str, Any] = {"execution_profiles": {EXEC_PROFILE_DEFAULT: profile}}
    if tls:
        options["ssl_context"] = ssl.create_default_context(cadata=ca_pem)
        options["ssl_options"] = {"server_hostname": host}
    if user is not None:
        options["auth_provider"] = PlainTextAuthProvider(username=user, password=password)
    return Cluster(
        contact_points=[host],
        port=int(port),
        protocol_version=5,
        connect_timeout=5,
        control_connection_timeout=5,
        **options,
    )


USABLE = {"sluice.dev/usable": "true"}
"""The label that lets the operator hand a Secret to a pipeline (its default)."""
PIPELINE_SECRETS = ("kafka-login", "kafka-ca", "cassandra-login", "cassandra-ca")


def grant_pipeline(
    core: Any,
    namespace: str,
    kafka: KafkaSecure,
    cassandra: CassandraSecure,
    keyspace: str,
    *,
    name: str,
    passwords: tuple[str, str],
) -> None:
    """A pipeline's way in: the SCRAM user ``name`` on Kafka and the login role
    ``name`` on ``cassandra-secure`` (keyspace ``keyspace`` only), with the passwords
    ``passwords`` (Kafka's, Cassandra's), and the labelled Secrets of
    :data:`PIPELINE_SECRETS` in ``namespace`` holding them and both CAs."""
    kafka_password, role_password = passwords
    kafka.add_scram_user(name, kafka_password, "SCRAM-SHA-512")
    cassandra.create_role(name, role_password, keyspace, ("SELECT", "MODIFY", "CREATE"))
    for secret, data in zip(
        PIPELINE_SECRETS,
        (
            {"username": name, "password": kafka_password},
            {"ca.crt": kafka.ca_pem},
            {"username": name, "password": role_password},
            {"ca.crt": cassandra.ca_pem},
        ),
        strict=True,
    ):
        core.create_namespaced_secret(
            namespace, {"metadata": {"name": secret, "labels": USABLE}, "stringData": data}
        )


def secured(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` reading Kafka over ``SASL_SSL`` and reaching Cassandra (sink and
    checkpoint) with a password and TLS, through the Secrets of :func:`grant_pipeline`."""
    spec["source"]["kafka"]["security"] = {
        "protocol": "SASL_SSL",
        "sasl": {"credentialsSecret": "kafka-login"},
        "tls": {"caSecret": "kafka-ca"},
    }
    cassandra = {"credentialsSecret": "cassandra-login", "tls": {"caSecret": "cassandra-ca"}}
    spec["sink"]["cassandra"] |= cassandra
    spec["checkpoint"]["cassandra"] |= cassandra
    return spec
