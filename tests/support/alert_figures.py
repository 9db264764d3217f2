"""The figures an alert test reports per alert: the fault, how long after it the
alert was in Alertmanager against what the rule promises, and how long after the
cause was removed it left Alertmanager. Purely computational: the tests fill
:class:`Figure` from an :class:`~sluice_dev.monitoring.timeline.Episode` and print
:func:`table` (pytest -s), the table the README and docs/alerts.md carry."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SCRAPE_SECONDS = 5.0
"""The stack's scrape interval (the chart's monitors are installed with it)."""
EVALUATION_SECONDS = 5.0
"""The stack's rule evaluation interval (``sluice_dev.monitoring.resources``)."""
DELIVERY_SECONDS = SCRAPE_SECONDS + EVALUATION_SECONDS
"""What a change of a series may take to reach Alertmanager beyond the rule's own
time: up to one scrape interval to be scraped, one evaluation interval to be
evaluated (Prometheus sends a firing or resolved alert at once)."""


@dataclass
class Figure:
    alert: str
    pipeline: str
    fault: str
    fault_at: float
    promise: float
    """Seconds from the fault within which the rule says it fires (its ``for:``, the
    condition's own onset and :data:`DELIVERY_SECONDS`)."""
    promise_text: str
    firing_at: float | None = None
    """Alertmanager's ``startsAt`` of the alert (when Prometheus fired it and sent it)."""
    seen_at: float | None = None
    """When the test's poll of ``/api/v2/alerts`` (every second) first listed it."""
    cure: str = ""
    cured_at: float | None = None
    resolve_promise: float | None = None
    resolve_text: str = ""
    resolved_at: float | None = None
    """Alertmanager's ``endsAt`` once resolved (else when the poll no longer listed it)."""
    gone_seen_at: float | None = None
    """When the poll first no longer listed it as active."""

    @property
    def to_fire(self) -> float | None:
        return None if self.firing_at is None else self.firing_at - self.fault_at

    @property
    def to_resolve(self) -> float | None:
        if self.resolved_at is None or self.cured_at is None:
            return None
        return self.resolved_at - self.cured_at

    @property
    def kept(self) -> bool:
        """Fired within its promise (and resolved within its own, when one was made)."""
        fired = self.to_fire is not None and self.to_fire <= self.promise
        resolved = self.resolve_promise is None or (
            self.to_resolve is not None and self.to_resolve <= self.resolve_promise
        )
        return fired and resolved


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{value:.0f} s"


def table(figures: Iterable[Figure]) -> str:
    """A Markdown table, one row per figure."""
    rows = [
        "| alert | fault | fault → in Alertmanager | promised | cause removed | "
        "→ resolved | promised |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        resolve_promise = (
            f"{seconds(f.resolve_promise)} ({f.resolve_text})"
            if f.resolve_promise is not None
            else f.resolve_text or "—"
        )
        rows.append(
            f"| {f.alert} | {f.fault} | {seconds(f.to_fire)} | "
            f"≤ {seconds(f.promise)} ({f.promise_text}) | {f.cure or '—'} | "
            f"{seconds(f.to_resolve)} | {resolve_promise} |"
        )
    return "\n".join(rows)
