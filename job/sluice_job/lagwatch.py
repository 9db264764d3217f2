"""Lag measured while a batch runs, not only between batches.

The loop measures lag when it plans and after each commit, with the end offsets of
that plan. A batch that runs for minutes (a first batch while Spark warms up, a sink
waiting out an outage) would then show the backlog of its plan while producers keep
writing: the status said 627 records while 61,000 waited (issue 39, item 8). A
:class:`LagWatch` measures again every few seconds on a thread of its own, with its
own watermark reader, until the loop ends. It only watches: a measure that fails
(Kafka away) is skipped, and the loop reports the outage when it meets it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

EVERY_SECONDS: Final = 5.0
"""How often lag is measured while the driver runs: the operator's status follows it at
most this often (``settings.Settings.progress_seconds``)."""


@dataclass
class LagWatch:
    """Calls ``measure`` every ``every`` seconds from :meth:`start` until :meth:`close`."""

    measure: Callable[[], None]
    every: float = EVERY_SECONDS
    _closed: threading.Event = field(default_factory=threading.Event, init=False)

    def start(self) -> None:
        threading.Thread(target=self._run, name="sluice-lag", daemon=True).start()

    def close(self) -> None:
        """Measure no more; a measure in flight is not waited for (a stopping driver
        releases the pipeline at once: its successor waits for that)."""
        self._closed.set()

    def _run(self) -> None:
        while not self._closed.wait(self.every):
            try:
                self.measure()
            except Exception:
                continue
