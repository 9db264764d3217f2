"""Kafka client settings for both clients the driver uses: librdkafka (watermarks,
dead letters) and the Java client inside Spark's Kafka source. Their names differ
for SASL, so both are built here from one description. Pure functions.

Credentials come from ``SLUICE_KAFKA_USERNAME``/``SLUICE_KAFKA_PASSWORD`` (the
operator fills them from ``source.kafka.credentialsSecret``), with optional
``SLUICE_KAFKA_MECHANISM`` (default SCRAM-SHA-512) and ``SLUICE_KAFKA_PROTOCOL``
(default SASL_SSL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice_api import env as names
from sluice_job.cassandra_session import Credentials

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class KafkaAccess:
    bootstrap_servers: str
    credentials: Credentials | None = None
    mechanism: str = "SCRAM-SHA-512"
    protocol: str = "SASL_SSL"

    @classmethod
    def from_env(cls, bootstrap_servers: str, env: Mapping[str, str]) -> KafkaAccess:
        return cls(
            bootstrap_servers,
            Credentials.from_env(env, names.KAFKA_CREDENTIALS),
            env.get("SLUICE_KAFKA_MECHANISM", "SCRAM-SHA-512"),
            env.get("SLUICE_KAFKA_PROTOCOL", "SASL_SSL"),
        )

    def librdkafka(self) -> dict[str, str]:
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.credentials:
            config |= {
                "security.protocol": self.protocol,
                "sasl.mechanism": self.mechanism,
                "sasl.username": self.credentials.username,
                "sasl.password": self.credentials.password,
            }
        return config

    def java(self) -> dict[str, str]:
        """Settings for Spark's Kafka source, without its ``kafka.`` prefix."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.credentials:
            module = LOGIN_MODULES.get(self.mechanism, LOGIN_MODULES["PLAIN"])
            user, password = self.credentials.username, self.credentials.password
            config |= {
                "security.protocol": self.protocol,
                "sasl.mechanism": self.mechanism,
                "sasl.jaas.config": f'{module} required username="{user}" password="{password}";',
            }
        return config
