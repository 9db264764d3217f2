"""A stop (SIGTERM) finishes the batch in flight, if there is one, and nothing else.

Why it exists: a driver asked to stop while no batch was in flight (starting up,
warming up as a standby, waiting for a dependency) used to carry on until its next
look at the stop, which a wait for Kafka, Cassandra or Pub/Sub never took: it then
held on until the stop timeout and left with exit 1, and ``kubectl delete`` timed
out with it. The rule now:

* a batch in flight (planned, not yet committed) is finished and committed, as
  before; the stop timeout bounds it;
* with none in flight the driver stops at once: every wait for a dependency and every
  step of the start-up looks at the stop (:func:`check` raises :class:`StopRequestedError`),
  and no batch begins after it (:class:`BatchGate`).

The signal handler runs in the main thread between two bytecodes of whatever the
driver is doing there, so it never runs at the same time as the loop, but it may come
between any two of its lines. :meth:`BatchGate.begin` marks the batch in flight
before it looks at whether the gate is closed, and :meth:`BatchGate.close` lets
finish only the batch marked: whichever comes first, the handler's word ("finishing
the batch in flight" or "stopping now") is what the loop then does. The loops also
look at the stop itself before they begin a batch (a stop not set by the handler).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

NOW: Final = "stop requested (SIGTERM): no batch in flight, stopping now"
FINISH: Final = "stop requested (SIGTERM): finishing the batch in flight"


class StopRequestedError(Exception):
    """Asked to stop with no batch in flight: the step named is left undone (nothing of
    a batch depends on it). Ends the driver cleanly (exit 0), never as a failure."""

    def __init__(self, step: str) -> None:
        super().__init__(f"stop requested before {step}")
        self.step = step


@dataclass
class BatchGate:
    """Which batch is in flight, and whether another may begin (not after a stop)."""

    in_flight: int | None = None
    closed: bool = False
    finishing: int | None = None
    """The batch in flight when the gate closed: the one the stop lets finish."""

    def begin(self, batch_id: int) -> bool:
        """Mark ``batch_id`` in flight; ``False`` (and nothing marked) if a stop came
        first."""
        self.in_flight = batch_id
        if self.closed and self.finishing != batch_id:
            self.in_flight = None
            return False
        return True

    def end(self) -> None:
        """The batch in flight was committed, or failed."""
        self.in_flight = None

    def close(self) -> int | None:
        """No batch begins from now on but the one in flight, if any: returns its id,
        which the stop lets finish (``None``: none, the driver stops at once)."""
        self.finishing = self.in_flight
        self.closed = True
        return self.finishing

    @property
    def stopping_now(self) -> bool:
        """Closed with no batch in flight: nothing the driver runs is worth waiting for."""
        return self.closed and self.finishing is None


def announcement(finishing: int | None) -> str:
    """The log line of a stop request; ``finishing``: the batch in flight, if any."""
    return NOW if finishing is None else FINISH


def timeout_message(finishing: int | None, seconds: float) -> str:
    """Why a stop did not end the driver within ``seconds`` (the stop timeout)."""
    if finishing is None:
        return f"the driver did not stop within {seconds:.0f}s of SIGTERM (no batch in flight)"
    return f"batch in flight did not finish within {seconds:.0f}s of SIGTERM"


def check(stop: threading.Event, step: str) -> None:
    """Raise :class:`StopRequestedError` before ``step`` if a stop was requested: called
    between the steps of the start-up, where no batch is in flight."""
    if stop.is_set():
        raise StopRequestedError(step)
