"""The stateful examples' tests, driver-level and on real nodes: per example (the
unique visitors' window state, the sessions' session state, the de-duplication's
keyed state) its sink table, its state in versions 1 and 2, its event time, options
and events (those re-sent too) and the oracle that checks the sink at the end."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice_dev.events import EventFactory
from tests.support import dedup, kpis, sessions, visitors

HALF = 3_000
"""Events each version reads: v1 the first half, v2 the second (then the flush)."""

Oracle = Callable[[Any, str, str, tuple[str, str], EventFactory, int], None]


@dataclass(frozen=True)
class Example:
    module: str
    table: str
    create: str
    lateness_seconds: int | None
    """``spec.transform.eventTime``'s allowed lateness; ``None``: no event time."""
    v1: dict[str, Any]
    v2: dict[str, Any]
    flush: int | None
    """An event whose watermark closes the others' windows or sessions, sent after
    v2's; ``None``: nothing to close."""
    events_per_second: int
    exact: Oracle
    options: Mapping[str, Any] = field(default_factory=dict)
    """``spec.transform.options``."""
    resent: tuple[tuple[range, ...], tuple[range, ...]] = ((), ())
    """Events sent again (the same seq, so the same ``event_id``, at later offsets)
    after v1's events and after v2's: ranges of seqs."""

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
    "dedup": Example(
        "sluice_job.examples.dedup:",
        "page_kpis",
        kpis.TABLE,
        None,
        dedup.SEEN_V1,
        dedup.SEEN_V2,
        None,
        100,
        dedup.assert_dedup_exact,
        options={"windowSeconds": dedup.WINDOW_S},
        resent=(
            # v1's: ids sent before its first driver started, and ids of the rest of its half
            (range(0, 600), range(2_400, HALF)),
            # v2's: ids v1 counted (some for the third time), and ids of v2's own half
            (range(300, 1_200), range(2_700, HALF), range(4_200, 4_800)),
        ),
    ),
}
