"""Failpoints: named places in the batch cycle where a test can make the driver pause.

Crash tests must SIGKILL the driver *inside* a given phase (reading, writing, between
write and commit, committing). Each phase announces itself with a ``phase`` log
line, and ``SLUICE_FAILPOINTS="after_write=2.5,after_commit=1"`` makes the driver
sleep that many seconds at the named point, widening the window a test aims at.
Unset (always, in production) it costs one dictionary lookup per point.

The loop itself has no failpoint calls: ``announce`` wraps its ports and announces
the points between them.
"""

from __future__ import annotations

import os
import time
from typing import Final

from sluice_job import logs

POINTS: Final = frozenset({"read", "write", "dead_letter", "after_write", "commit", "after_commit"})
"""``dead_letter``: a batch's rejects are counted and about to be sent."""


def _parse(text: str) -> dict[str, float]:
    result: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, seconds = item.partition("=")
        if name not in POINTS:
            raise ValueError(f"SLUICE_FAILPOINTS: unknown point {name!r}; known: {sorted(POINTS)}")
        result[name] = float(seconds or 0)
    return result


_pauses = _parse(os.environ.get("SLUICE_FAILPOINTS", ""))


def phase(name: str, batch_id: int) -> None:
    """Announce ``name`` for ``batch_id`` and pause there if a failpoint asks to."""
    logs.event("phase", phase=name, batch_id=batch_id)
    pause = _pauses.get(name)
    if pause:
        time.sleep(pause)
