"""kopf handlers: every trigger calls the same idempotent ``reconcile``.

Create, update (spec and metadata only; kopf ignores status changes), resume (an
operator restart) and a one-second timer all reconcile; the delete handler (which
makes kopf hold a finalizer) reconciles until every driver has stopped cleanly.
"""

from __future__ import annotations

from typing import Any

import kopf

from sluice_operator import naming
from sluice_operator.decide import Settings
from sluice_operator.kube import Kube
from sluice_operator.reconcile import reconcile

RESOURCE = (naming.GROUP, naming.VERSION, naming.PLURAL)
TIMER_SECONDS = 1.0

_kube: Kube | None = None
SETTINGS = Settings()


def kube() -> Kube:
    global _kube
    if _kube is None:
        _kube = Kube.from_environment()
    return _kube


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.level = 30  # kopf's own events: warnings and errors only
    settings.persistence.finalizer = "sluice.dev/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="sluice.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="sluice.dev", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300


@kopf.on.resume(*RESOURCE)
@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE)
def on_change(body: kopf.Body, **_: Any) -> None:
    reconcile(kube(), body, settings=SETTINGS)


@kopf.timer(*RESOURCE, interval=TIMER_SECONDS, sharp=True)
def on_timer(body: kopf.Body, **_: Any) -> None:
    if body["metadata"].get("deletionTimestamp") is None:
        reconcile(kube(), body, settings=SETTINGS)


@kopf.on.delete(*RESOURCE)
def on_delete(body: kopf.Body, **_: Any) -> None:
    decision = reconcile(kube(), body, deleting=True, settings=SETTINGS)
    if not decision.finished:
        raise kopf.TemporaryError("waiting for the driver to stop cleanly", delay=1)
