"""Waiting on a condition with a deadline: the only way tests wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout``.
    Exceptions of the ``ignoring`` types count as "not yet" (a server coming back)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except ignoring:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
