"""A hot standby (``spec.standby: 1``), up to the moment it claims its epoch.

Why it exists: a driver killed with no standby costs a new pod, a JVM, a SparkSession
and its connections before the next commit. A hot standby has all that already and
waits beside the running driver; the operator promotes it when that driver's pod
fails, is deleted or its node is lost (``control``), and it claims the epoch it was
started with, fencing the old one exactly as a restarted driver would: a zombie on a
partitioned node cannot commit again.

It gets ready as a warm handover's standby does (``standby.check``, then
``standby.warm_read``; ``sluice_standby_ready`` 1), then waits, never planning or
writing:

* promoted (the control port's request named its epoch): it claims at once
  (:func:`hot_turn`); a release by the running driver is not a turn, since only the
  operator knows whether that driver is gone or being upgraded, and a hot standby of
  the old spec must not take over an upgrade;
* the checkpoint row, read every :data:`CHECK_SECONDS`, shows its own epoch or a
  newer one: a newer driver holds the pipeline, and its claim says it is fenced;
* every :data:`KEEP_WARM_SECONDS` it reads and transforms the last committed records
  again (``standby.warm_read``): Spark ends idle Python workers after a minute and
  idle pooled Kafka consumers after five, and the first batch after a promotion
  would pay for them.

Asked to stop (SIGTERM) before a promotion, it leaves without claiming.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Final

from sluice_job import logs, metrics
from sluice_job.checkpoint_rows import Checkpoint
from sluice_job.standby import CheckpointReader, Predecessor, Turn, read_row

POLL_SECONDS: Final = 0.1
"""Longest a promotion or a stop waits to be noticed."""
CHECK_SECONDS: Final = 2.0
"""How often the checkpoint row is read for a newer epoch."""
KEEP_WARM_SECONDS: Final = 30.0
"""How often the warm-up runs again (Spark's idle Python workers last a minute)."""


def hot_turn(checkpoint: Checkpoint, epoch: int, promoted: bool) -> Turn:
    """Whether a hot standby of ``epoch`` claims now."""
    if checkpoint.epoch >= epoch:
        return Turn.CLAIM  # a newer driver holds it: the claim says fenced
    if not promoted:
        return Turn.WAIT
    if checkpoint.owner is not None and not checkpoint.released:
        return Turn.FENCE
    return Turn.CLAIM


def wait_for_promotion(
    store: CheckpointReader,
    epoch: int,
    stop: threading.Event,
    promoted: threading.Event,
    warm: Callable[[], object],
    *,
    last_commit: Callable[[int], datetime | None] = lambda _batch_id: None,
    clock: Callable[[], float] = time.monotonic,
    poll: float = POLL_SECONDS,
    check_every: float = CHECK_SECONDS,
    warm_every: float = KEEP_WARM_SECONDS,
) -> Predecessor | None:
    """Wait until promoted (or a newer epoch shows), keeping warm; ``None`` if
    ``stop`` is set first. A checkpoint read that fails is tried again (an outage):
    the standby holds nothing yet."""
    checked = warmed = clock()
    while not stop.is_set():
        now, asked = clock(), promoted.is_set()
        if asked or now - checked >= check_every:
            checkpoint = read_row(store, stop, poll)
            if checkpoint is None:
                continue
            checked = now
            decided = hot_turn(checkpoint, epoch, asked)
            if decided is not Turn.WAIT:
                committed_at = last_commit(checkpoint.batch_id)
                return Predecessor(checkpoint.epoch, checkpoint.batch_id, committed_at, decided)
        if now - warmed >= warm_every:
            warm()
            warmed = clock()
        promoted.wait(poll)
    return None


def taken_over(pipeline: str, epoch: int, predecessor: Predecessor | None) -> None:
    """Log the outcome of the wait; a standby that took over is no longer one."""
    if predecessor is None:
        logs.event("hot standby stopped before a promotion: nothing claimed", epoch=epoch)
        return
    metrics.STANDBY_READY.labels(pipeline).set(0)
    logs.event(
        "hot standby takes over",
        epoch=epoch,
        previous_epoch=predecessor.epoch,
        batch_id=predecessor.batch_id,
        newer_epoch_holds=predecessor.epoch >= epoch,
    )
