"""The pods bound to one node, kept current by list + watch.

A kubelet learns its pods from a watch on ``spec.nodeName``; so does the agent. Each
cycle lists the pods (a consistent snapshot and a resourceVersion), then watches from
that version for up to ``WATCH_SECONDS``; the next cycle lists again, which is the
resync. A watch that expires (410 Gone) or breaks just starts the next cycle.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

from kubernetes import watch
from kubernetes.client import CoreV1Api, V1Pod
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

WATCH_SECONDS = 45
LIST_TIMEOUT = 10.0
RETRY_SECONDS = 1.0


class PodInformer:
    """A uid -> pod map of the pods with ``spec.nodeName == node``."""

    def __init__(self, core: CoreV1Api, node: str, on_change: Callable[[], None]) -> None:
        self._core = core
        self._selector = f"spec.nodeName={node}"
        self._on_change = on_change
        self._lock = threading.Lock()
        self._pods: dict[str, V1Pod] | None = None

    def snapshot(self) -> dict[str, V1Pod] | None:
        """A copy of the current pods, or ``None`` before the first list."""
        with self._lock:
            return None if self._pods is None else dict(self._pods)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self._watch(self._relist(), stop)
            except ApiException as err:
                if err.status != 410:
                    log.warning(
                        "pod watch (%s) failed: %s %s", self._selector, err.status, err.reason
                    )
                    stop.wait(RETRY_SECONDS)
            except Exception as err:  # the API may be down; keep trying
                log.warning("pod watch (%s) failed: %r", self._selector, err)
                stop.wait(RETRY_SECONDS)

    def _relist(self) -> str:
        listing = self._core.list_pod_for_all_namespaces(
            field_selector=self._selector, _request_timeout=LIST_TIMEOUT
        )
        pods = {_uid(p): p for p in listing.items}
        with self._lock:
            self._pods = pods
        self._on_change()
        return str(listing.metadata.resource_version if listing.metadata else "")

    def _watch(self, version: str, stop: threading.Event) -> None:
        seconds = random.randint(WATCH_SECONDS, WATCH_SECONDS * 2)
        # kubernetes.watch is untyped: the ignores below are for it alone.
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(  # type: ignore[no-untyped-call]
            self._core.list_pod_for_all_namespaces,
            field_selector=self._selector,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=seconds,
            _request_timeout=seconds + 10,
        ):
            if stop.is_set():
                stream.stop()  # type: ignore[no-untyped-call]
                return
            kind, pod = event["type"], event["object"]
            if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(pod, V1Pod):
                self._apply(kind, pod)

    def _apply(self, kind: str, pod: V1Pod) -> None:
        with self._lock:
            if self._pods is None:
                return
            if kind == "DELETED":
                self._pods.pop(_uid(pod), None)
            else:
                self._pods[_uid(pod)] = pod
        self._on_change()


def _uid(pod: V1Pod) -> str:
    return str(pod.metadata.uid) if pod.metadata else ""
