"""What an on-call engineer sees of an alert over time, as episodes: when it first
showed pending in Prometheus, when it reached Alertmanager, when it left it.

Purely computational: :class:`Timeline` is fed snapshots (the alerts Prometheus and
Alertmanager listed at one instant) by :mod:`sluice_dev.monitoring.alertwatch`, which
polls them; the demo and the alert tests read episodes and figures from it. An
alert's identity is its name, its ``pipeline`` label (the one alert without it,
``SluiceOperatorDown``, has ``pipeline=""``) and its ``dependency`` label where it has
one, so the same alert firing for two pipelines is two episodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Key = tuple[str, str, str]
"""(alertname, pipeline, dependency): ``SluiceDependencyUnavailable`` is one alert per
dependency of a pipeline."""


def key_of(labels: Mapping[str, str]) -> Key:
    return (labels.get("alertname", ""), labels.get("pipeline", ""), labels.get("dependency", ""))


@dataclass
class Episode:
    """One stretch of an alert: pending (Prometheus), then in Alertmanager, then gone."""

    key: Key
    labels: dict[str, str]
    pending_at: float | None = None
    """When Prometheus first listed it pending (or firing, if never seen pending)."""
    firing_at: float | None = None
    """When Alertmanager's /api/v2/alerts first listed it."""
    resolved_at: float | None = None
    """When Alertmanager first no longer listed it as active, after it had."""
    quiet_at: float | None = None
    """When Prometheus first no longer listed it, pending or firing."""
    starts_at: float | None = None
    """Alertmanager's own ``startsAt``: when Prometheus made it fire (it sends it then)."""
    ends_at: float | None = None
    """Alertmanager's ``endsAt`` once resolved: when Prometheus resolved it."""

    @property
    def open(self) -> bool:
        return self.resolved_at is None and self.quiet_at is None


@dataclass
class Timeline:
    """Episodes of every alert seen, from successive snapshots."""

    episodes: list[Episode] = field(default_factory=list)

    def observe(
        self,
        at: float,
        prometheus: Iterable[Mapping[str, Any]] | None,
        alertmanager: Iterable[Mapping[str, Any]] | None,
    ) -> None:
        """One instant's view: Prometheus's alerts (``labels``, ``state``) and
        Alertmanager's (``labels``, ``startsAt``, ``endsAt``; one whose ``endsAt`` has
        passed is resolved). A view that could not be read is ``None`` and changes
        nothing."""
        if prometheus is not None:
            self._prometheus(at, {key_of(a["labels"]): dict(a["labels"]) for a in prometheus})
        if alertmanager is not None:
            listed = list(alertmanager)
            active = {key_of(a["labels"]): a for a in still_active(listed, at)}
            ended = {
                key_of(a["labels"]): _unix(str(a["endsAt"]))
                for a in listed
                if key_of(a["labels"]) not in active and a.get("endsAt")
            }
            self._alertmanager(at, active, ended)

    def _current(self, key: Key) -> Episode | None:
        for episode in reversed(self.episodes):
            if episode.key == key:
                return episode
        return None

    def _prometheus(self, at: float, listed: dict[Key, dict[str, str]]) -> None:
        for key, labels in listed.items():
            episode = self._current(key)
            if episode is None or episode.quiet_at is not None:
                self.episodes.append(Episode(key, labels, pending_at=at))
        for episode in self.episodes:
            seen_pending = episode.pending_at is not None and episode.quiet_at is None
            if seen_pending and episode.key not in listed:
                episode.quiet_at = at

    def _alertmanager(
        self, at: float, active: dict[Key, Mapping[str, Any]], ended: dict[Key, float]
    ) -> None:
        for key, alert in active.items():
            episode = self._current(key)
            if episode is None or episode.resolved_at is not None:
                episode = Episode(key, dict(alert["labels"]), pending_at=None)
                self.episodes.append(episode)
            if episode.firing_at is None:
                episode.firing_at = at
                episode.labels = dict(alert["labels"])
                if alert.get("startsAt"):
                    episode.starts_at = _unix(str(alert["startsAt"]))
        for episode in self.episodes:
            gone = episode.key not in active
            if gone and episode.firing_at is not None and episode.resolved_at is None:
                episode.resolved_at = at
                episode.ends_at = ended.get(episode.key)

    def of(self, alertname: str, pipeline: str = "") -> list[Episode]:
        return [e for e in self.episodes if e.key[:2] == (alertname, pipeline)]

    def first_firing(
        self, alertname: str, pipeline: str = "", after: float = 0.0
    ) -> Episode | None:
        """The first episode of the alert that reached Alertmanager at or after ``after``."""
        for episode in self.of(alertname, pipeline):
            if episode.firing_at is not None and episode.firing_at >= after:
                return episode
        return None

    def touching(self, pipeline: str, start: float, end: float) -> list[Episode]:
        """Episodes of ``pipeline`` pending or firing at some time within [start, end]."""
        found = []
        for episode in self.episodes:
            if episode.key[1] != pipeline:
                continue
            began = min(t for t in (episode.pending_at, episode.firing_at) if t is not None)
            ended = min(
                (t for t in (episode.quiet_at, episode.resolved_at) if t is not None),
                default=None,
            )
            if began <= end and (ended is None or ended >= start):
                found.append(episode)
        return found


def still_active(alerts: Iterable[Mapping[str, Any]], now: float) -> list[Mapping[str, Any]]:
    """Alertmanager's alerts not resolved at ``now`` (Unix time): ``/api/v2/alerts``
    may list an alert Prometheus resolved until its ``endsAt`` has passed."""
    return [a for a in alerts if not a.get("endsAt") or _unix(str(a["endsAt"])) > now]


def _unix(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()
