"""Watching the stack's alerts as they happen: a thread reads Prometheus's alerts
(pending and firing) and Alertmanager's active alerts every second into a
:class:`~sluice_dev.monitoring.timeline.Timeline`, so the demo (``make demo-alerts``)
or a test can wait for an alert to reach Alertmanager, or to leave it, and read
afterwards when each did.

Alertmanager's ``/api/v2/alerts`` is what an on-call engineer's tools read; the
pending state exists only in Prometheus (``/api/v1/alerts``), which is how a test
proves that an alert did not even start to fire (no false positives)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sluice_dev.monitoring import client
from sluice_dev.monitoring.timeline import Episode, Timeline

POLL_SECONDS = 1.0

T = TypeVar("T")


@dataclass
class AlertWatch:
    prometheus_url: str
    alertmanager_url: str
    timeline: Timeline = field(default_factory=Timeline)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def poll_once(self) -> None:
        now = time.time()
        prometheus = _read(lambda: client.get(self.prometheus_url, "/api/v1/alerts")["alerts"])
        manager = _read(lambda: client.alerts(self.alertmanager_url))
        with self._lock:
            self.timeline.observe(now, prometheus, manager)

    def run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self.poll_once()

    def stop(self) -> None:
        self._stop.set()

    def episodes(self) -> list[Episode]:
        with self._lock:
            return list(self.timeline.episodes)

    def firing(self, alertname: str, pipeline: str, *, after: float, timeout: float) -> Episode:
        """Until the alert (of ``pipeline``; ``""`` for one without) is in
        Alertmanager, in an episode that reached it at or after ``after``."""

        def found() -> Episode | None:
            with self._lock:
                return self.timeline.first_firing(alertname, pipeline, after)

        return _until(found, timeout, f"{alertname} of {pipeline!r}")

    def resolved(self, episode: Episode, *, timeout: float) -> Episode:
        """Until ``episode`` has left Alertmanager's active alerts."""
        return _until(
            lambda: episode if episode.resolved_at is not None else None,
            timeout,
            f"{episode.key[0]} of {episode.key[1]!r} resolved",
        )


def _until(found: Callable[[], T | None], timeout: float, what: str) -> T:
    """``found()`` once it is not None; TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (value := found()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(POLL_SECONDS)
    return value


def _read(call: Any) -> list[Any] | None:
    try:
        return list(call())
    except client.ApiError:
        return None  # a server restarting: this instant is not seen


@contextmanager
def watching(prometheus_url: str, alertmanager_url: str) -> Iterator[AlertWatch]:
    watch = AlertWatch(prometheus_url, alertmanager_url)
    thread = threading.Thread(target=watch.run, name="alert-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.stop()
        thread.join(10)
