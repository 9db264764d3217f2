"""kopf handlers: one loop per pipeline, paced by its decisions, woken by changes.

Each pipeline has a daemon that reconciles, then waits for what the decision asked
(``Decision.requeue_after``: seconds while a pod starts or stops, the time left of a
restart back-off or of a NotReady node's grace, ``progress_seconds`` while it runs)
or for a wake-up, whichever comes first. Wake-ups come through watches: a change of
the pipeline's spec (its ``metadata.generation``) or its deletion, an event of one
of its driver pods, a node of one of its drivers changing readiness. A new or
resumed pipeline's loop starts with a reconcile. Driver
pods and nodes are held in kopf indexes, so an idle Running pipeline costs one read
(the pipeline itself, the status being the write-ahead log) per ``progress_seconds``
and no write. The delete handler (which makes kopf hold a finalizer) reconciles
until every driver has stopped cleanly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from sluice_operator import bells, clusterid, naming, scrapes, watched
from sluice_operator.actions import Decision
from sluice_operator.kube import Kube
from sluice_operator.model import NodeView, PodView
from sluice_operator.reconcile import reconcile
from sluice_operator.settings import Settings

RESOURCE = (naming.GROUP, naming.VERSION, naming.PLURAL)
DRIVERS = {naming.LABEL_PIPELINE: kopf.PRESENT}
RETRY_CAP_SECONDS = 30.0
DELETE_PATIENCE_SECONDS = 60.0
LOG = logging.getLogger("sluice_operator")

_kube: Kube | None = None
SETTINGS = Settings()
_node_ready: dict[str, bool] = {}
_generations: dict[watched.PipelineKey, tuple[object, bool]] = {}
_EXECUTOR = ThreadPoolExecutor(max_workers=32, thread_name_prefix="reconcile")
"""Reconciles wait on the API server, not the CPU: enough threads that a burst of
new pipelines does not queue behind a handful of them."""

PodIndex = Mapping[watched.PipelineKey, Any]
NodeIndex = Mapping[str, Any]


def kube() -> Kube:
    global _kube
    if _kube is None:
        _kube = Kube.from_environment()
    return _kube


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global SETTINGS
    if not SETTINGS.cluster_id:  # run as `kopf run -m sluice_operator.handlers`
        SETTINGS = dataclasses.replace(
            SETTINGS, cluster_id=clusterid.resolve("", kube().namespace_uid)
        )
    settings.posting.level = 30  # kopf's own events: warnings and errors only
    settings.persistence.finalizer = "sluice.dev/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="sluice.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="sluice.dev", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300
    # Watch only driver pods (server-side), not every pod of the watched namespaces.
    settings.watching.label_selectors["pods"] = f"{naming.LABEL_ROLE}={naming.ROLE_DRIVER}"


@kopf.on.startup()
async def listen_to_drivers(**_: Any) -> None:
    """A changed reading of a driver (``scrapes``) wakes its pipeline's loop."""
    scrapes.READINGS.notify = functools.partial(_ring_soon, asyncio.get_running_loop())


def _ring_soon(loop: asyncio.AbstractEventLoop, pipeline: str) -> None:
    """From a driver exchange thread: wake ``pipeline``'s (``namespace/name``) loop,
    whose driver's reading changed."""
    namespace, _, name = pipeline.partition("/")
    loop.call_soon_threadsafe(bells.ring, (namespace, name))


# -- what the watches hold ---------------------------------------------------------


@kopf.index("pods", labels=DRIVERS)
def driver_pods(body: kopf.Body, **_: Any) -> dict[watched.PipelineKey, PodView] | None:
    return watched.pod_entry(body)


@kopf.index("nodes")
def node_views(body: kopf.Body, **_: Any) -> dict[str, NodeView]:
    return watched.node_entry(body)


@kopf.on.event("pods", labels=DRIVERS)
async def on_pod(namespace: str | None, labels: kopf.Labels, **_: Any) -> None:
    bells.ring((namespace or "", labels[naming.LABEL_PIPELINE]))


@kopf.on.event("nodes")
async def on_node(name: str, **kwargs: Any) -> None:
    node_views, driver_pods = _indexes(kwargs)
    ready = all(view.ready for view in node_views.get(name, ()))
    if _node_ready.get(name) == ready:
        return
    _node_ready[name] = ready
    for key in watched.pipelines_on(driver_pods, name):
        bells.ring(key)


# -- the pipelines -----------------------------------------------------------------


def _indexes(kwargs: Mapping[str, Any]) -> tuple[NodeIndex, PodIndex]:
    """The two indexes, which kopf passes to every handler by their functions' names."""
    return kwargs["node_views"], kwargs["driver_pods"]


async def _reconcile(
    body: kopf.Body, indexes: Mapping[str, Any], *, deleting: bool = False
) -> Decision:
    key = _key(body)
    nodes, pods = _indexes(indexes)
    seen = watched.snapshot(pods, nodes, key)
    call = functools.partial(
        reconcile, kube(), body, deleting=deleting, settings=SETTINGS, watched=seen
    )
    return await asyncio.get_running_loop().run_in_executor(_EXECUTOR, call)


def _key(body: kopf.Body) -> watched.PipelineKey:
    return (body["metadata"]["namespace"], body["metadata"]["name"])


@kopf.on.event(*RESOURCE)
async def on_pipeline(body: kopf.Body, **kwargs: Any) -> None:
    """A spec change (a new ``metadata.generation``) or a deletion wakes the
    pipeline's loop at once; the operator's own status writes do not. A pipeline seen
    for the first time is reconciled here at once."""
    key, meta = _key(body), body["metadata"]
    seen = (meta.get("generation"), meta.get("deletionTimestamp") is not None)
    first = key not in _generations
    if _generations.get(key) != seen:
        _generations[key] = seen
        bells.ring(key)
    if first:  # a new pipeline's first pod need not wait for kopf's finalizer and daemon
        await _reconcile(body, kwargs)


@kopf.daemon(*RESOURCE, cancellation_timeout=10.0)
async def pipeline_loop(stopped: kopf.DaemonStopped, body: kopf.Body, **kwargs: Any) -> None:
    key = _key(body)
    errors = 0
    try:
        while not stopped:
            if body["metadata"].get("deletionTimestamp") is not None:
                return  # the delete handler takes over
            try:
                decision = await _reconcile(body, kwargs)
                wait = decision.requeue_after
                if wait is None:  # nothing in motion: a change rings; resync seldom
                    wait = SETTINGS.resync_seconds
                errors = 0
            except Exception as err:  # an API outage: retry, doubling up to a cap
                errors += 1
                wait = min(2.0**errors, RETRY_CAP_SECONDS)
                LOG.warning("reconcile of %s/%s failed (%s); again in %.0fs", *key, err, wait)
            await bells.pause(key, wait, stopped.wait())
    finally:
        bells.forget(key)
        _generations.pop(key, None)


@kopf.on.delete(*RESOURCE)
async def on_delete(body: kopf.Body, **kwargs: Any) -> None:
    """Reconcile until every driver has stopped cleanly, woken by its pod's events;
    after ``DELETE_PATIENCE_SECONDS`` hand back to kopf, which retries (each retry
    writes kopf's progress annotations, so it is not the way to wait)."""
    key = _key(body)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DELETE_PATIENCE_SECONDS
    while True:
        decision = await _reconcile(body, kwargs, deleting=True)
        if decision.finished:
            return
        if loop.time() >= deadline:
            raise kopf.TemporaryError("waiting for the driver to stop cleanly", delay=1)
        await bells.pause(key, min(decision.requeue_after or 1.0, 1.0), asyncio.Event().wait())
