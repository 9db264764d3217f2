"""Leader election judges a Lease's expiry on this replica's own clock (issue 15 item
6). Before, a standby compared the holder's ``renewTime`` with its own wall clock: a
standby whose clock ran 20 s ahead took the Lease from a holder renewing it every
2 s, and two operators acted at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sluice_operator.leader import TIMEOUT, LeaderElection, Observation

pytestmark = pytest.mark.unit


@dataclass
class FakeLeases:
    """A Lease API holding one Lease; records the timeouts it was called with."""

    lease: client.V1Lease | None = None
    version: int = 0
    timeouts: list[float | None] = field(default_factory=list)

    def read_namespaced_lease(self, name: str, namespace: str, **kw: Any) -> client.V1Lease:
        self.timeouts.append(kw.get("_request_timeout"))
        if self.lease is None:
            raise ApiException(status=404)
        return self.lease

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: client.V1Lease, **kw: Any
    ) -> None:
        self.timeouts.append(kw.get("_request_timeout"))
        assert self.lease is not None
        assert self.lease.metadata is not None
        sent = body.metadata.resource_version if body.metadata else None
        if sent is not None and sent != self.lease.metadata.resource_version:
            raise ApiException(status=409)
        self._store(body)

    def create_namespaced_lease(self, namespace: str, body: client.V1Lease, **kw: Any) -> None:
        self.timeouts.append(kw.get("_request_timeout"))
        self._store(body)

    def renew_by(self, holder: str, at: datetime) -> None:
        """Another replica renews, stamping its own (skewed) clock."""
        self._store(
            client.V1Lease(
                metadata=client.V1ObjectMeta(name="sluice-operator"),
                spec=client.V1LeaseSpec(holder_identity=holder, renew_time=at),
            )
        )

    def _store(self, body: client.V1Lease) -> None:
        self.version += 1
        body.metadata = body.metadata or client.V1ObjectMeta()
        body.metadata.resource_version = str(self.version)
        self.lease = body


@dataclass
class Clock:
    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


def standby(leases: FakeLeases, clock: Clock) -> LeaderElection:
    election = LeaderElection(client.ApiClient(), "ns", duration=15.0, renew=2.0, clock=clock)
    election.leases = leases  # type: ignore[assignment]
    return election


def test_a_standby_with_a_clock_ahead_does_not_take_a_lease_that_is_renewed() -> None:
    leases, clock = FakeLeases(), Clock()
    election = standby(leases, clock)
    holder_time = datetime.now(UTC) - timedelta(seconds=20)  # the holder's clock is behind
    for _ in range(20):  # 40 s of renewals every 2 s
        holder_time += timedelta(seconds=2)
        leases.renew_by("other-1", holder_time)
        assert not election._try()
        clock.now += 2.0
    assert leases.lease is not None
    assert leases.lease.spec.holder_identity == "other-1"


def test_a_lease_not_renewed_for_its_duration_of_local_time_is_taken() -> None:
    leases, clock = FakeLeases(), Clock()
    election = standby(leases, clock)
    leases.renew_by("dead-1", datetime.now(UTC) + timedelta(hours=1))  # a clock far ahead
    assert not election._try()
    clock.now += 14.0
    assert not election._try()
    clock.now += 2.0
    assert election._try()
    assert leases.lease is not None
    assert leases.lease.spec.holder_identity == election.identity


def test_a_released_lease_is_taken_at_once_and_every_call_has_a_timeout() -> None:
    leases, clock = FakeLeases(), Clock()
    election = standby(leases, clock)
    leases.renew_by("gone-1", datetime.now(UTC))
    assert leases.lease is not None
    leases.lease.spec.holder_identity = None
    assert election._try()
    assert leases.timeouts
    assert set(leases.timeouts) == {TIMEOUT}


def test_an_observation_expires_only_when_the_record_stays() -> None:
    seen = Observation()
    assert not seen.expired(100.0, 15.0), "nothing seen yet"
    seen.see(("a", 1), 100.0)
    seen.see(("a", 1), 110.0)
    assert not seen.expired(114.0, 15.0)
    seen.see(("a", 2), 114.0)
    assert not seen.expired(120.0, 15.0)
    assert seen.expired(129.5, 15.0)
