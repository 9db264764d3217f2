"""One idempotent reconcile of one pipeline: observe → decide → apply → metrics.

Called from kopf's create/update/resume/delete handlers and from each pipeline's
loop; a lock per pipeline makes calls for the same pipeline take turns, since the
loop and the change handlers of one object may run at the same time. Each reconcile
reads the pipeline afresh: the status is our write-ahead log and kopf's copy of the
object may not hold our last write yet. Driver pods and nodes come from the
watches (``watched``) when the caller has them, from the API otherwise.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from sluice_api.spec import PipelineSpec
from sluice_api.validation import describe
from sluice_operator import (
    builders,
    changes,
    consent,
    decision_log,
    envfrom,
    metrics,
    promote,
    scrapes,
    unknown_fields,
)
from sluice_operator.actions import Action, CreatePod, Decision, Emit, Promote, WriteStatus
from sluice_operator.changes import Change
from sluice_operator.consent import Label
from sluice_operator.decide import decide
from sluice_operator.failures import after_rejection
from sluice_operator.kube import Kube, NotOwnedError
from sluice_operator.model import (
    NodeView,
    Observed,
    PodPhase,
    PodView,
    StandbyState,
    Status,
)
from sluice_operator.progress import DriverProgress
from sluice_operator.settings import DEFAULTS, Settings
from sluice_operator.watched import Watched

LOG = logging.getLogger("sluice_operator")
_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)


def parse_spec(
    raw: Mapping[str, Any],
) -> tuple[PipelineSpec | None, str | None, tuple[str, ...]]:
    """The spec, or why it is invalid; and the fields set aside as unknown to this
    operator (``unknown_fields``)."""
    try:
        return PipelineSpec.model_validate(dict(raw)), None, ()
    except ValidationError as err:
        aside = unknown_fields.set_aside(raw, err)
        if aside is None:
            return None, describe(err), ()
        known, ignored = aside
    try:
        return PipelineSpec.model_validate(known), None, ignored
    except ValidationError as err:
        return None, describe(err), ()


def reconcile(
    kube: Kube,
    body: Mapping[str, Any],
    *,
    deleting: bool = False,
    settings: Settings = DEFAULTS,
    watched: Watched | None = None,
) -> Decision:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    with _locks[f"{namespace}/{name}"]:
        current = kube.pipeline(namespace, name)
        if current is None:
            return Decision(finished=True)
        observed = observe(
            kube,
            current,
            deleting=deleting,
            watched=watched,
            secret_label=settings.secret_label,
            require_endpoints=settings.require_endpoints,
            refused_types=settings.refused_secret_types,
            recheck_seconds=settings.consent_recheck_seconds,
        )
        decision = decide(observed, settings)
        applied: list[Action] = []
        try:
            decision = _apply(kube, observed, decision, applied)
        except BaseException:
            # The metrics say what was done before the failure: a status written,
            # then a call that failed, must not leave the phase gauge at the phase
            # before it (an alert on a phase the pipeline has left).
            metrics.record(observed, Decision(tuple(applied)))
            raise
        metrics.record(observed, decision)
        return decision


def _apply(kube: Kube, observed: Observed, decision: Decision, applied: list[Action]) -> Decision:
    """Carry out the decision's actions in order, each one done appended to
    ``applied``. A driver pod the API server refuses (4xx) ends it: the refusal is
    recorded as a failure (``after_rejection``) instead of raising, which would start
    the next epoch at the next reconcile, and so on."""
    written = observed.status
    leads_to = next(
        (a.status for a in reversed(decision.actions) if isinstance(a, WriteStatus)),
        observed.status,
    )
    stalled = False
    for action in decision.actions:
        if isinstance(action, WriteStatus):
            written = action.status
        if isinstance(action, Emit):  # what the operator does and why, in its log too
            level = logging.WARNING if action.type == "Warning" else logging.INFO
            LOG.log(
                level,
                "%s/%s %s: %s",
                observed.namespace,
                observed.name,
                action.reason,
                action.message,
                extra={"fields": decision_log.fields(observed, leads_to, action)},
            )
        if isinstance(action, Promote):  # to the standby's pod, not the API server
            sent = promote.PROMOTIONS.promote(action.ip, builders.CONTROL_PORT, action.epoch)
            stalled = not sent and promote.PROMOTIONS.stalled(action.ip, builders.CONTROL_PORT)
            continue
        try:
            kube.apply(observed.namespace, observed.name, action, uid=observed.uid)
            applied.append(action)
        except NotOwnedError as err:
            LOG.warning("driver pod %s not created: %s", written.driver_pod, err)
            after = after_rejection(observed, written, str(err), reason="NotOwned")
            for step in after.actions:
                kube.apply(observed.namespace, observed.name, step, uid=observed.uid)
            return after
        except ApiException as err:
            if not isinstance(action, CreatePod) or not refused(err):
                raise
            LOG.warning("driver pod %s refused: %s", written.driver_pod, explain(err))
            kube.ensured.pop(observed.uid, None)  # a missing ServiceAccount, perhaps
            after = after_rejection(observed, written, explain(err))
            for step in after.actions:
                kube.apply(observed.namespace, observed.name, step, uid=observed.uid)
            return after
    if stalled:  # its control port stalls: asking again every second helps no one
        return replace(
            decision, requeue_after=max(decision.requeue_after or 0, DEFAULTS.progress_seconds)
        )
    return decision


def refused(err: ApiException) -> bool:
    """A definite no (invalid, forbidden by admission or quota): retrying the same
    request cannot succeed. 409 (it exists), 429, 5xx and timeouts are not that."""
    return err.status in (400, 403, 404, 422)


def explain(err: ApiException) -> str:
    """The API server's own message (from its Status body), else the HTTP reason."""
    try:
        message = json.loads(err.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or f"{err.status} {err.reason}")


def observe(
    kube: Kube,
    body: Mapping[str, Any],
    *,
    deleting: bool,
    watched: Watched | None = None,
    secret_label: Label | None = None,
    require_endpoints: bool = False,
    refused_types: frozenset[str] = frozenset(),
    recheck_seconds: float | None = None,
) -> Observed:
    """The pipeline as it is. The Secrets its spec names are read before a driver may
    start, and, every ``recheck_seconds``, while the driver started with that spec
    runs (``Observed.consent_rechecked``)."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec, error, ignored = parse_spec(body.get("spec") or {})
    status = Status.parse(body.get("status"))
    pods, nodes = _drivers(kube, namespace, name, status, watched)
    current = next((p for p in pods if p.name == status.driver_pod), None)
    standby = status.standby
    standby_pod = (
        next((p for p in pods if p.name == standby.pod), None)
        if standby is not None and standby.live
        else None
    )
    upgrading = spec is not None and changes.classify(status.spec_hash, spec) is Change.RESTART
    may_start = current is None or current.terminated or upgrading
    recheck = (
        not may_start
        and recheck_seconds is not None
        and _recheck_due(meta["uid"], recheck_seconds, deleting=deleting)
    )
    refusals: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    if spec is not None and (may_start or recheck):
        refusals = _secret_refusals(
            kube, namespace, spec, secret_label, require_endpoints, refused_types
        )
    env_refusals: tuple[str, ...] = ()
    if spec is not None and may_start and not any(refusals):
        env_refusals = _env_refusals(kube, namespace, spec)
    return Observed(
        name=name,
        namespace=namespace,
        uid=meta["uid"],
        generation=int(meta.get("generation", 1)),
        spec=spec,
        spec_error=error,
        unknown_fields=ignored,
        status=status,
        pods=pods,
        nodes=nodes,
        any_node_ready=watched.any_node_ready if watched is not None else True,
        deleting=deleting or meta.get("deletionTimestamp") is not None,
        now=datetime.now(UTC),
        raw_spec=body.get("spec") or {},
        progress=_progress(
            f"{namespace}/{name}",
            current,
            follow=standby is not None and standby.hot and standby.state is StandbyState.READY,
        ),
        standby_progress=_progress(f"{namespace}/{name}", standby_pod),
        driver_silent_seconds=_silence(f"{namespace}/{name}", current),
        secret_refusals=refusals[0],
        endpoint_refusals=refusals[1],
        env_refusals=env_refusals,
        consent_rechecked=spec is not None and recheck,
    )


_consent_checked: dict[str, float] = {}
"""When each pipeline's (uid) running driver last had its Secrets checked again."""


def _recheck_due(uid: str, interval: float, *, deleting: bool) -> bool:
    if deleting:
        _consent_checked.pop(uid, None)
        return False
    now = time.monotonic()
    if now - _consent_checked.get(uid, -math.inf) < interval:
        return False
    _consent_checked[uid] = now
    return True


def _secret_refusals(
    kube: Kube,
    namespace: str,
    spec: PipelineSpec,
    label: Label | None,
    require_endpoints: bool,
    refused_types: frozenset[str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Secrets the spec may not use (a token or a refused type, no consent label), and
    Secrets it may not send where it does (``consent.endpoint_refusals``), from their
    metadata."""
    refs = consent.references(spec)
    if not refs:
        return (), ()
    found = kube.secret_metadata(namespace, (r.secret for r in refs))
    labels = {name: meta.labels if meta else None for name, meta in found.items()}
    tokens = consent.token_refusals(refs, found, refused_types)
    others = tuple(r for r in refs if r.secret not in tokens)
    unlabelled = consent.refusals(others, labels, label) if label is not None else ()
    unusable = (*tokens.values(), *unlabelled)
    sent = consent.deliveries(spec)
    return unusable, consent.endpoint_refusals(refs, sent, found, require=require_endpoints)


def _env_refusals(kube: Kube, namespace: str, spec: PipelineSpec) -> tuple[str, ...]:
    """``envFrom`` objects whose keys make reserved variables (``envfrom.refusals``)."""
    named = envfrom.sources(spec)
    if not named:
        return ()
    return envfrom.refusals(named, kube.env_keys(namespace, named))


def _drivers(
    kube: Kube, namespace: str, name: str, status: Status, watched: Watched | None
) -> tuple[tuple[PodView, ...], dict[str, NodeView]]:
    """Driver pods and their nodes: from the watches, unless they have not seen the
    pod the status names yet (just created), then from the API, as without watches."""
    live = status.standby is not None and status.standby.live
    named = [status.driver_pod, status.standby.pod if status.standby and live else None]
    if watched is None or any(
        pod is not None and all(p.name != pod for p in watched.pods) for pod in named
    ):
        pods = kube.driver_pods(namespace, name)
        return pods, kube.nodes(p.node for p in pods if p.node)
    missing = {p.node for p in watched.pods if p.node and p.node not in watched.nodes}
    return watched.pods, {**watched.nodes, **kube.nodes(missing)}


def _progress(
    pipeline: str, current: PodView | None, *, follow: bool = False
) -> DriverProgress | None:
    """The current driver's own report, if it runs and answered: its last reading,
    renewed off this thread (``scrapes``), so a reconcile never waits on a driver;
    ``follow``: read every second meanwhile (``scrapes.Readings.latest``)."""
    if current is None or current.ip is None or current.phase is not PodPhase.RUNNING:
        return None
    if current.deleting:
        return None
    return scrapes.READINGS.latest(pipeline, current.ip, builders.METRICS_PORT, follow=follow)


def _silence(pipeline: str, current: PodView | None) -> float | None:
    """How long the current driver has not been connected to, having answered before
    (``scrapes.Readings.silent_for``)."""
    if current is None or current.ip is None or current.phase is not PodPhase.RUNNING:
        return None
    return scrapes.READINGS.silent_for(pipeline, current.ip, builders.METRICS_PORT)
