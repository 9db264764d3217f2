"""Failpoints around the batch loop's ports, so the loop itself has none.

The runner wraps its executor and checkpoint store in these: each forwards to the
real port and announces the failpoint (``failpoints.phase``) that lies between two
steps of the loop. The adapters announce the points inside their own steps (``read``
and ``write`` in the executor, ``after_commit`` between the commit LWT and the
history row).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sluice_job.checkpoint_rows import Batch, Checkpoint
from sluice_job.failpoints import phase
from sluice_job.ports import Executor, PhaseTimes, Store


@dataclass(frozen=True)
class AnnouncingExecutor:
    """The executor, announcing ``after_write`` once a batch's output is written."""

    inner: Executor

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        times = self.inner.execute(batch, epoch)
        phase("after_write", batch.batch_id)
        return times


@dataclass(frozen=True)
class AnnouncingStore:
    """The checkpoint store, announcing ``commit`` before a batch's commit LWT (the
    store announces ``after_commit`` itself, between the LWT and the history row)."""

    inner: Store

    def claim(self, epoch: int) -> Checkpoint:
        return self.inner.claim(epoch)

    def plan(self, batch: Batch) -> None:
        self.inner.plan(batch)

    def commit(self, batch: Batch, started_at: datetime) -> float:
        phase("commit", batch.batch_id)
        return self.inner.commit(batch, started_at)

    def reset(self, batch: Batch, reset_id: str, record: str) -> None:
        self.inner.reset(batch, reset_id, record)

    def release(self) -> bool:
        return self.inner.release()
