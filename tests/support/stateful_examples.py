"""The stateful examples' tests, driver-level and on real nodes: per example (the
unique visitors' window state, the sessions' session state) its sink table, its
state in versions 1 and 2, its lateness, its events and the oracle that checks the
sink at the end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice_dev.events import EventFactory
from tests.support import sessions, visitors

HALF = 3_000
"""Events each version reads: v1 the first half, v2 the second (then the flush)."""

Oracle = Callable[[Any, str, str, tuple[str, str], EventFactory, int], None]


@dataclass(frozen=True)
class Example:
    module: str
    table: str
    create: str
    lateness_seconds: int
    v1: dict[str, Any]
    v2: dict[str, Any]
    flush: int
    events_per_second: int
    exact: Oracle

    def factory(self, seed: int) -> EventFactory:
        return EventFactory(seed=seed, events_per_second=self.events_per_second)

    @property
    def upgrade(self) -> dict[str, Any]:
        """The patch of ``spec.transform`` that makes v1 v2."""
        return {"entrypoint": self.module + "transform_v2", "state": [self.v2]}


EXAMPLES = {
    "unique-visitors": Example(
        "sluice_job.examples.unique_visitors:",
        "page_visitors",
        visitors.TABLE,
        5,
        visitors.STATE_V1,
        visitors.STATE_V2,
        visitors.FLUSH,
        100,
        visitors.assert_visitors_exact,
    ),
    "sessions": Example(
        "sluice_job.examples.sessions:",
        "user_sessions",
        sessions.TABLE,
        sessions.LATENESS_S,
        sessions.STATE_V1,
        sessions.STATE_V2,
        sessions.FLUSH,
        1,  # see tests.support.sessions.GAP_S
        sessions.assert_sessions_exact,
    ),
}
