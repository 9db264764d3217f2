"""Opening a Cassandra session from ``contactPoints``, an optional credentials pair and
optional TLS material (``tls``: the nodes' ``client_encryption_options``).

Used by the checkpoint store and the Cassandra sink. Credentials arrive as
environment variables (the operator fills them from the Secret named in the spec)
and are never logged. Retries are disabled: an LWT must never be retried blindly,
and the sink's writes are retried by re-running the batch, not by the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cassandra import ConsistencyLevel, ProtocolVersion
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    FallthroughRetryPolicy,
    TokenAwarePolicy,
)

from sluice_job.tls import TlsMaterial

DEFAULT_PORT = 9042


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str

    def __repr__(self) -> str:
        return f"Credentials(username={self.username!r}, password=<hidden>)"

    @classmethod
    def from_env(cls, env: Mapping[str, str], prefix: str) -> Credentials | None:
        """``<prefix>_USERNAME`` and ``<prefix>_PASSWORD``, if both are set."""
        user, password = env.get(f"{prefix}_USERNAME"), env.get(f"{prefix}_PASSWORD")
        return cls(user, password) if user and password else None


def contact_points(points: Sequence[str]) -> list[tuple[str, int]]:
    result = []
    for point in points:
        host, _, port = point.partition(":")
        result.append((host, int(port) if port else DEFAULT_PORT))
    return result


def reconnection() -> ExponentialReconnectionPolicy:
    """How a session reconnects to a node it lost: after 0.5 s, doubling to every 2 s,
    for as long as it takes. The driver's default gives up after 64 attempts (its own
    comment calls that legacy), about 2 minutes at this pace: a driver that waited out
    a longer Cassandra outage then failed every attempt with "no host tried" until its
    pod was deleted, though Cassandra was back."""
    return ExponentialReconnectionPolicy(0.5, 2.0, max_attempts=None)


def connect(
    points: Sequence[str],
    credentials: Credentials | None,
    tls: TlsMaterial | None = None,
    *,
    timeout: float = 10.0,
) -> tuple[Cluster, Session]:
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
        retry_policy=FallthroughRetryPolicy(),
        consistency_level=ConsistencyLevel.LOCAL_QUORUM,
        serial_consistency_level=ConsistencyLevel.SERIAL,
        request_timeout=timeout,
    )
    auth = (
        PlainTextAuthProvider(credentials.username, credentials.password) if credentials else None
    )
    cluster = Cluster(
        contact_points=contact_points(points),
        protocol_version=ProtocolVersion.V5,
        reconnection_policy=reconnection(),
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        auth_provider=auth,
        connect_timeout=timeout,
        control_connection_timeout=timeout,
        # With check_hostname the driver checks each node against its own address.
        ssl_context=tls.ssl_context() if tls else None,
    )
    return cluster, cluster.connect()
