"""One idempotent reconcile of one pipeline: observe → decide → apply → metrics.

Called from kopf's create/update/resume/delete handlers and from a timer; a lock
per pipeline makes calls for the same pipeline take turns, since the timer and the
change handlers of one object may run at the same time. Each reconcile reads the
pipeline afresh: the status is our write-ahead log and kopf's copy of the object
may not hold our last write yet.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from sluice_api.spec import PipelineSpec
from sluice_api.validation import describe
from sluice_operator import builders, metrics, progress
from sluice_operator.actions import Decision
from sluice_operator.decide import DEFAULTS, Settings, decide
from sluice_operator.kube import Kube
from sluice_operator.model import Observed, PodPhase, PodView, Status
from sluice_operator.progress import DriverProgress

_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)


def parse_spec(raw: Mapping[str, Any]) -> tuple[PipelineSpec | None, str | None]:
    try:
        return PipelineSpec.model_validate(dict(raw)), None
    except ValidationError as err:
        return None, describe(err)


def reconcile(
    kube: Kube,
    body: Mapping[str, Any],
    *,
    deleting: bool = False,
    settings: Settings = DEFAULTS,
) -> Decision:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    with _locks[f"{namespace}/{name}"]:
        current = kube.pipeline(namespace, name)
        if current is None:
            return Decision(finished=True)
        observed = observe(kube, current, deleting=deleting)
        decision = decide(observed, settings)
        for action in decision.actions:
            kube.apply(namespace, name, action, uid=observed.uid)
        metrics.record(observed, decision)
        return decision


def observe(kube: Kube, body: Mapping[str, Any], *, deleting: bool) -> Observed:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec, error = parse_spec(body.get("spec") or {})
    pods = kube.driver_pods(namespace, name)
    nodes = kube.nodes(p.node for p in pods if p.node)
    status = Status.parse(body.get("status"))
    return Observed(
        name=name,
        namespace=namespace,
        uid=meta["uid"],
        generation=int(meta.get("generation", 1)),
        spec=spec,
        spec_error=error,
        status=status,
        pods=pods,
        nodes=nodes,
        deleting=deleting or meta.get("deletionTimestamp") is not None,
        now=datetime.now(UTC),
        raw_spec=body.get("spec") or {},
        progress=_progress(f"{namespace}/{name}", pods, status),
    )


def _progress(pipeline: str, pods: tuple[PodView, ...], status: Status) -> DriverProgress | None:
    """The current driver's own report, if it runs and answers."""
    current = next((p for p in pods if p.name == status.driver_pod), None)
    if current is None or current.ip is None or current.phase is not PodPhase.RUNNING:
        return None
    if current.deleting:
        return None
    return progress.scrape(current.ip, builders.METRICS_PORT, pipeline)
