"""One micro-batch as it runs: its plan, when it started, how long each step took.

The runner reads as plan -> write -> commit; the clock readings and the arithmetic
of phase times live here, in one place, and so does the shape of the ``batch`` log
line that every committed batch writes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from sluice_job import offsets, outages
from sluice_job.checkpoint import Batch, FencedError
from sluice_job.ports import Committed, Observer, PhaseTimes

T = TypeVar("T")


@dataclass
class StepTimes:
    """Seconds spent in named steps, summed per step, timed by ``clock``."""

    clock: Callable[[], float]
    seconds: dict[str, float] = field(default_factory=dict)

    def timed(self, step: str, call: Callable[[], T]) -> T:
        """Run ``call`` and add how long it took to ``step``."""
        began = self.clock()
        try:
            return call()
        finally:
            self.seconds[step] = self.seconds.get(step, 0.0) + self.clock() - began


@dataclass
class BatchRun(StepTimes):
    """A batch from its start to its commit, timed by ``clock`` (seconds); its steps
    (``seconds``) are the ones the runner timed: ``plan`` and ``commit``."""

    batch: Batch = field(kw_only=True)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    _started: float = field(init=False)

    def __post_init__(self) -> None:
        self._started = self.clock()

    def committed(self, times: PhaseTimes | None, commit_lwt_seconds: float) -> Committed:
        return Committed(
            self.batch,
            times,
            commit_seconds=self.seconds.get("commit", 0.0),
            batch_seconds=self.clock() - self._started,
            commit_lwt_seconds=commit_lwt_seconds,
            plan_seconds=self.seconds.get("plan", 0.0),
        )


def log_fields(done: Committed, *, epoch: int, recovered: bool) -> dict[str, Any]:
    """The fields of a committed batch's ``batch`` log line."""
    batch, times = done.batch, done.times
    return {
        "batch_id": batch.batch_id,
        "epoch": epoch,
        "recovered": recovered,
        "version": batch.version,
        "ranges": offsets.ranges_json(batch.ranges),
        "records": batch.records,
        "records_out": times.records_out if times else 0,
        "rejected": times.records_rejected if times else 0,
        "late": times.records_late if times else 0,
        "event_watermark": times.event_watermark if times else None,
        "read_s": round(times.read, 4) if times else 0.0,
        "transform_s": round(times.transform, 4) if times else 0.0,
        "dead_letter_s": round(times.dead_letter, 4) if times else 0.0,
        "write_s": round(times.write, 4) if times else 0.0,
        "commit_s": round(done.commit_seconds, 4),
        "commit_lwt_s": round(done.commit_lwt_seconds, 4),
        "plan_s": round(done.plan_seconds, 4),
        "batch_s": round(done.batch_seconds, 4),
        **_state_fields(times),
    }


def _state_fields(times: PhaseTimes | None) -> dict[str, Any]:
    """A stateful batch's state requests (``state.tally``): task-seconds and keys."""
    io = times.state if times is not None else None
    if io is None:
        return {}
    return {
        "state_read_s": round(io.read_seconds, 4),
        "state_keys_read": io.keys_read,
        "state_write_s": round(io.write_seconds, 4),
        "state_keys_written": io.keys_written,
    }


@contextlib.contextmanager
def deadline(
    batch_id: int, seconds: float | None, on_timeout: Callable[[int, float], None] | None
) -> Iterator[None]:
    """One attempt of a batch that outlives ``seconds`` calls ``on_timeout`` (from a
    timer thread, with the batch id and ``seconds``); ``None``: no deadline."""
    if seconds is None or on_timeout is None:
        yield
        return
    timer = threading.Timer(seconds, on_timeout, (batch_id, seconds))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def attempted(
    batch_id: int,
    attempt: Callable[[], None],
    observer: Observer,
    pause: Callable[[float], None],
) -> None:
    """Batch ``batch_id``'s ``attempt``, again through dependency outages
    (``outages``); a failure that ends it is told to ``observer`` (fenced or not)
    and raised."""
    try:
        outages.through_outages(f"batch {batch_id}", attempt, observer, pause=pause)
    except FencedError:
        observer.failed(fenced=True)
        raise
    except Exception:
        observer.failed(fenced=False)
        raise
