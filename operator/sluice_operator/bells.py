"""Wake-ups for the per-pipeline loops: a pod or node event rings the bell of the
pipelines it concerns, and the pipeline's loop, waiting out its decision's
``requeue_after``, reconciles at once. Everything here runs on kopf's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Hashable

_bells: dict[Hashable, asyncio.Event] = {}


def ring(key: Hashable) -> None:
    """Wake the loop of ``key``; a ring before its first pause is kept for it."""
    _bells.setdefault(key, asyncio.Event()).set()


async def pause(key: Hashable, seconds: float | None, stopped: Awaitable[object]) -> bool:
    """Wait ``seconds`` (None: until rung), a ring or ``stopped``, whichever comes
    first; True if it was rung."""
    bell = _bells.setdefault(key, asyncio.Event())
    rung = asyncio.ensure_future(bell.wait())
    stop = asyncio.ensure_future(stopped)
    try:
        await asyncio.wait((rung, stop), timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        rung.cancel()
        stop.cancel()
    was_rung = bell.is_set()
    bell.clear()
    return was_rung


def forget(key: Hashable) -> None:
    _bells.pop(key, None)
