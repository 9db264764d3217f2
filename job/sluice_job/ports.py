"""The ports of the batch loop: what the runner drives and whom it tells.

The runner holds no Spark, Kafka or Cassandra code. It drives three ports — the
checkpoint store, the watermark reader, the batch executor — that the entry point
wires to the real adapters (``checkpoint``, ``watermarks``, ``execute``), and it
tells an :class:`Observer` (metrics, the informative Kafka consumer group) what
happened. Tests give it fakes of the same shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sluice_job.checkpoint_rows import Batch, Checkpoint
from sluice_job.offsets import Positions, TopicPartition, Watermarks
from sluice_job.planner import Skip
from sluice_job.state_io import StateIO


class Store(Protocol):
    def claim(self, epoch: int) -> Checkpoint: ...
    def plan(self, batch: Batch) -> None: ...
    def commit(self, batch: Batch, started_at: datetime) -> float:
        """Commit ``batch``; returns the seconds its LWT took."""
        ...

    def reset(self, batch: Batch, reset_id: str, record: str) -> None: ...
    def release(self) -> bool: ...


class WatermarkSource(Protocol):
    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]: ...
    def at_time(self, topics: Sequence[str], millis: int) -> dict[TopicPartition, int | None]:
        """Per partition, the first offset whose record time is at or after ``millis``;
        ``None`` where no record is that recent."""
        ...


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds per phase of an executed batch, and its record counts."""

    read: float
    transform: float
    write: float
    records_out: int
    records_in: int = 0
    records_rejected: int = 0
    dead_letter: float = 0.0
    event_watermark: int | None = None
    """The event-time watermark (ms) the batch's records moved the pipeline's to;
    ``None``: the pipeline declares no event time, or the batch left it."""
    records_late: int = 0
    """Records behind the watermark (``spec.transform.eventTime``)."""
    state: StateIO | None = None
    """What the batch's requests to its states' tables took (``state.tally``);
    ``None``: the transform declares no state."""


def with_watermark(batch: Batch, times: PhaseTimes | None) -> Batch:
    """``batch`` as it commits: with the watermark its execution reached, if any."""
    if times is None or times.event_watermark is None:
        return batch
    return dataclasses.replace(batch, event_watermark=times.event_watermark)


class Executor(Protocol):
    def execute(self, batch: Batch, epoch: int) -> PhaseTimes: ...


@dataclass(frozen=True)
class Committed:
    """A committed batch as the observers see it."""

    batch: Batch
    times: PhaseTimes | None
    commit_seconds: float
    """The commit LWT and the batch-history row."""
    batch_seconds: float
    commit_lwt_seconds: float = 0.0
    """The commit LWT alone."""
    plan_seconds: float = 0.0
    """The write-ahead plan LWT (0 for a batch planned by an earlier driver)."""


class Observer(Protocol):
    """Told what the loop does; must not raise (it only watches)."""

    def resumed(self, checkpoint: Checkpoint) -> None:
        """The driver claimed ``checkpoint``: what the pipeline has committed, whichever
        epoch committed it, before this driver's first commit."""
        ...

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None: ...
    def cap(self, records_per_partition: int) -> None: ...
    def skipped(self, skip: Skip) -> None: ...
    def committed(self, done: Committed) -> None: ...
    def failed(self, *, fenced: bool) -> None: ...
    def dependency(self, name: str, *, available: bool, detail: str = "") -> None:
        """``name`` (cassandra, kafka, datastore) went away or came back."""
        ...


class NoObserver:
    def resumed(self, checkpoint: Checkpoint) -> None:
        pass

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        pass

    def cap(self, records_per_partition: int) -> None:
        pass

    def skipped(self, skip: Skip) -> None:
        pass

    def committed(self, done: Committed) -> None:
        pass

    def failed(self, *, fenced: bool) -> None:
        pass

    def dependency(self, name: str, *, available: bool, detail: str = "") -> None:
        pass


@dataclass(frozen=True)
class Observers:
    """Several observers as one, told in order."""

    members: tuple[Observer, ...]

    def resumed(self, checkpoint: Checkpoint) -> None:
        for member in self.members:
            member.resumed(checkpoint)

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        for member in self.members:
            member.lag(marks, positions)

    def cap(self, records_per_partition: int) -> None:
        for member in self.members:
            member.cap(records_per_partition)

    def skipped(self, skip: Skip) -> None:
        for member in self.members:
            member.skipped(skip)

    def committed(self, done: Committed) -> None:
        for member in self.members:
            member.committed(done)

    def failed(self, *, fenced: bool) -> None:
        for member in self.members:
            member.failed(fenced=fenced)

    def dependency(self, name: str, *, available: bool, detail: str = "") -> None:
        for member in self.members:
            member.dependency(name, available=available, detail=detail)
