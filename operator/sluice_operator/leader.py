"""Leader election with a coordination.k8s.io Lease: of several operator replicas,
only the holder of the Lease reconciles; the others wait as hot standbys.

The holder renews every ``renew`` seconds; a Lease not renewed for ``duration``
seconds may be taken over. Taking and renewing use the Lease's resourceVersion
(optimistic concurrency), so two replicas can never both hold it. A holder that
cannot renew within ``duration`` stops the process: better a restart than two
operators acting at once. A holder that stops (SIGTERM) releases the Lease, so a
standby takes over at once rather than after ``duration`` seconds.

Whether a Lease has expired is judged on this replica's own clock, as client-go's
leader election does: a standby notes when it first saw the Lease's current record
(holder and renew time) and treats it as expired only when that record has not
changed for ``duration`` seconds of local time. Comparing the holder's ``renewTime``
with our wall clock instead would let a clock skew between two nodes take the Lease
from a live holder (our clock ahead) or keep it from a dead one (ours behind). Every
call to the API server has a timeout, so a hung connection cannot stall renewal.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

LOG = logging.getLogger("sluice_operator.leader")
TIMEOUT = 5.0
"""Seconds any Lease call may take (connect and read)."""


@dataclass
class Observation:
    """The Lease record a replica last saw and when, on its own monotonic clock."""

    record: tuple[object, ...] | None = None
    seen_at: float = 0.0

    def see(self, record: tuple[object, ...], now: float) -> None:
        if record != self.record:
            self.record, self.seen_at = record, now

    def expired(self, now: float, duration: float) -> bool:
        """The record has not changed for ``duration`` seconds of local time."""
        return self.record is not None and now - self.seen_at > duration


def process_identity() -> str:
    """Who this operator process is, for the Lease and for kopf: the host (the pod's
    name in a cluster) and the process id. Not the user's name: a container running
    as a uid without an /etc/passwd entry (the chart's 10001, or whatever uid a
    platform assigns) has none, and kopf's own guess (``getpass.getuser``) raises."""
    return f"{socket.gethostname()}-{os.getpid()}"


class LeaderElection:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str = "sluice-operator",
        duration: float = 15.0,
        renew: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leases = client.CoordinationV1Api(api)
        self.clock = clock
        self.observed = Observation()
        self.namespace, self.name = namespace, name
        self.duration, self.renew = duration, renew
        self.identity = process_identity()
        self.leading = threading.Event()
        self._stopping = threading.Event()

    def acquire(self) -> None:
        """Block until this replica holds the Lease, then keep renewing it."""
        LOG.info("waiting to lead as %s (lease %s/%s)", self.identity, self.namespace, self.name)
        while not self._try():
            time.sleep(self.renew)
        self.leading.set()
        LOG.info("leading as %s", self.identity)
        threading.Thread(target=self._keep, name="lease-renewal", daemon=True).start()

    def release(self) -> None:
        """Stop renewing and hand the Lease back (holder cleared) if this replica holds it."""
        self._stopping.set()
        if not self.leading.is_set():
            return
        try:
            lease = self.leases.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=TIMEOUT
            )
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.renew_time = None
            lease.spec.acquire_time = None
            self.leases.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=TIMEOUT
            )
            LOG.info("released lease %s/%s", self.namespace, self.name)
        except ApiException as err:  # it expires by itself after ``duration``
            LOG.warning("lease release failed: %s %s", err.status, err.reason)

    def _keep(self) -> None:
        last = time.monotonic()
        while not self._stopping.wait(self.renew):
            try:
                if self._try():
                    last = time.monotonic()
                    continue
                LOG.error("lease %s taken by another replica; exiting", self.name)
            except Exception as err:  # a failed renewal is retried until the deadline
                LOG.warning("lease renewal failed: %s", err)
                if time.monotonic() - last < self.duration:
                    continue
            os._exit(1)

    def _try(self) -> bool:
        now = datetime.now(UTC)
        try:
            lease = self.leases.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=TIMEOUT
            )
        except ApiException as err:
            if err.status != 404:
                raise
            return self._create(now)
        spec = lease.spec
        holder = spec.holder_identity if spec else None
        renewed = spec.renew_time if spec else None
        self.observed.see((holder, renewed), self.clock())
        free = holder is None or self.observed.expired(self.clock(), self.duration)
        if holder != self.identity and not free:
            return False
        body = self._body(
            now, acquired=spec.acquire_time if holder == self.identity and spec else now
        )
        body["metadata"]["resourceVersion"] = (
            lease.metadata.resource_version if lease.metadata else None
        )
        try:
            self.leases.replace_namespaced_lease(
                self.name,
                self.namespace,
                client.V1Lease.model_validate(body),
                _request_timeout=TIMEOUT,
            )
        except ApiException as err:
            if err.status == 409:
                return False
            raise
        return True

    def _create(self, now: datetime) -> bool:
        try:
            self.leases.create_namespaced_lease(
                self.namespace,
                client.V1Lease.model_validate(self._body(now, now)),
                _request_timeout=TIMEOUT,
            )
        except ApiException as err:
            if err.status == 409:
                return False
            raise
        return True

    def _body(self, now: datetime, acquired: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.duration),
                "acquireTime": acquired,
                "renewTime": now,
            },
        }
