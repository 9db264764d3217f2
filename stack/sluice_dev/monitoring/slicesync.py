"""Keeps the node agent's pods in EndpointSlices while monitoring runs: the loop
around :mod:`sluice_dev.monitoring.endpointslices` (why they are needed, and why of
``addressType: FQDN``, is there).

Each cycle lists Services, running pods and the slices it manages, then creates or
updates the slices that differ and deletes those no Service needs any more. Only
slices labelled as its own (``endpointslice.kubernetes.io/managed-by:
sluice-dev.monitoring``) are touched; a Service's deletion takes its slices with it
(owner references).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from sluice_dev.monitoring import endpointslices, kubeapi
from sluice_dev.monitoring.apply import apply
from sluice_dev.paths import Layout

log = logging.getLogger(__name__)

SLICES: Final = "/apis/discovery.k8s.io/v1"
SELECTOR: Final = f"{endpointslices.MANAGED_BY_LABEL}={endpointslices.MANAGER}"


@dataclass
class SliceSync:
    layout: Layout
    identity: str

    def once(self) -> int:
        """Sync once; returns how many slices were written or deleted."""
        services = kubeapi.items(self.layout, self.identity, "/api/v1/services")
        pods = kubeapi.items(
            self.layout, self.identity, "/api/v1/pods?fieldSelector=status.phase%3DRunning"
        )
        existing = {
            (s["metadata"]["namespace"], s["metadata"]["name"]): s
            for s in kubeapi.items(
                self.layout, self.identity, f"{SLICES}/endpointslices?labelSelector={SELECTOR}"
            )
        }
        wanted = endpointslices.desired(services, pods)
        changes = 0
        for key, body in wanted.items():
            if key not in existing or not endpointslices.same(existing[key], body):
                apply(self.layout, body, identity=self.identity)
                log.info("endpointslice %s/%s: %d endpoint(s)", *key, len(body["endpoints"]))
                changes += 1
        for namespace, name in existing.keys() - wanted.keys():
            self._delete(namespace, name)
            changes += 1
        return changes

    def _delete(self, namespace: str, name: str) -> None:
        kubeapi.delete(
            self.layout, self.identity, f"{SLICES}/namespaces/{namespace}/endpointslices/{name}"
        )
        log.info("endpointslice %s/%s: deleted", namespace, name)
