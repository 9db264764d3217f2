"""What a stateful transform holds: each declared state of the batch, to look up.

A :class:`States` is made once per batch, for that batch's version: every lookup
reads the rows the batches before it committed (``access.lookup_arrow``), so a
re-run of the batch after a crash reads what the first attempt read. A lookup is
lazy, like the rest of the transform's plan: it runs inside the Spark jobs that
write the batch, one read per distinct key.

What the transform returns as a state's new rows is checked here too
(:meth:`KeyedState.conform`): the key columns, only declared value columns (cast
to their declared types) and, optionally, ``sluice_deleted``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_api.event_time import EventTime
from sluice_api.state import DELETED_COLUMN
from sluice_job.state.access import StateTarget, lookup_arrow
from sluice_job.state.tally import Tally

LATEST: Final = 2**62
"""A version past every batch's: a lookup at it reads each key's newest row, which
is what a standby's warm-up reads (it writes nothing)."""


@dataclass
class Kept:
    """A batch's lookups, kept (``persist``) so that the batch's Spark jobs share one
    evaluation of each: the sink's write and a state's write both hold the lookup in
    their plans, and would otherwise read every key twice (and could read two
    different answers, were a newer driver writing between them). Let go of after the
    batch (:meth:`release`)."""

    frames: list[DataFrame] = field(default_factory=list)

    def keep(self, frame: DataFrame) -> DataFrame:
        kept = frame.persist()
        self.frames.append(kept)
        return kept

    def release(self) -> None:
        for frame in self.frames:
            frame.unpersist(blocking=False)
        self.frames.clear()


class StateShapeError(ValueError):
    """A transform gave a state rows it cannot hold (a missing key column, an
    undeclared column, an undeclared state); the message names them."""


@dataclass(frozen=True)
class KeyedState:
    """One declared state, as batch ``version`` reads it."""

    target: StateTarget
    version: int
    stored: DataFrame | None = None
    """Rows to look up instead of the table (``sluice_job.testing``): the key and
    value columns, one row per key."""
    watermark_ms: int | None = None
    """The event-time watermark the batches before this one committed."""
    lateness_seconds: int = 0
    """``spec.transform.eventTime.allowedLatenessSeconds``."""
    tally: Tally | None = None
    """Where the tasks add what their requests took (``state.tally``); ``None``: not
    counted."""
    kept: Kept | None = None
    """Where the batch keeps its lookups; ``None``: each lookup is evaluated by every
    job that holds it (a standby's warm-up, which writes nothing)."""

    @property
    def name(self) -> str:
        return self.target.schema.name

    @property
    def key(self) -> tuple[str, ...]:
        """The key columns, in order."""
        return self.target.schema.key_names

    @property
    def columns(self) -> tuple[str, ...]:
        """The value columns."""
        return self.target.schema.value_names

    def lookup(self, keys: DataFrame) -> DataFrame:
        """The current state of the keys in ``keys`` (a frame with the key columns;
        other columns are ignored, a key may repeat): one row per key that has state,
        with the key and value columns. A key without state (never written, deleted
        or expired) has no row: join with ``how="left"`` to keep it."""
        missing = [k for k in self.key if k not in keys.columns]
        if missing:
            raise StateShapeError(
                f"state {self.name!r}: lookup(keys) needs the key column(s) {missing}; "
                f"the frame has {keys.columns}"
            )
        schema = self.target.schema
        distinct = keys.select(*self.key).dropDuplicates()
        typed = distinct.select(
            *(F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.spark_types(self.key))
        )
        if self.stored is not None:
            columns = [*self.key, *self.columns]
            return typed.join(self.conform(self.stored).select(*columns), list(self.key))
        read = partial(lookup_arrow, self.target, self.version, self.tally)
        found = typed.mapInArrow(read, schema.spark_schema())
        return found if self.kept is None else self.kept.keep(found)

    def conform(self, rows: DataFrame) -> DataFrame:
        """``rows`` as the state's write takes them: key columns, the declared value
        columns it has (cast), and ``sluice_deleted`` if it has it; raises
        :class:`StateShapeError` naming what does not fit."""
        have = set(rows.columns)
        missing = [k for k in self.key if k not in have]
        if missing:
            raise StateShapeError(
                f"the transform's new state {self.name!r} lacks key column(s) {missing}"
            )
        declared = {*self.key, *self.columns, DELETED_COLUMN}
        extra = sorted(have - declared)
        if extra:
            raise StateShapeError(
                f"the transform's new state {self.name!r} has column(s) {extra} the state "
                f"does not declare (declared: {[*self.key, *self.columns]}); declare them in "
                "spec.transform.state[].columns or drop them"
            )
        chosen = [n for n in (*self.key, *self.columns) if n in have]
        types = self.target.schema.spark_types(chosen)
        select = [F.col(f.name).cast(f.dataType).alias(f.name) for f in types]
        if DELETED_COLUMN in have:
            select.append(F.col(DELETED_COLUMN).cast("boolean").alias(DELETED_COLUMN))
        return rows.select(*select)


@dataclass(frozen=True)
class States(Mapping[str, KeyedState]):
    """A batch's declared states by name (``state["totals"]``), and its event time:
    the pipeline's declaration and the watermark the batches before it committed."""

    targets: tuple[StateTarget, ...]
    version: int
    event_time: EventTime | None = None
    watermark_ms: int | None = None
    """Milliseconds since the epoch; ``None``: no event time seen yet (nothing is late)."""
    stored: Mapping[str, DataFrame] | None = None
    """Per state, rows to look up instead of its table (``sluice_job.testing``)."""
    tally: Tally | None = None
    """Where the batch's state requests are counted (``state.tally``)."""
    kept: Kept | None = None
    """Where the batch keeps its lookups (:class:`Kept`)."""

    @property
    def watermark(self) -> dt.datetime | None:
        """The watermark as a UTC time: a record with an earlier event time is late."""
        if self.watermark_ms is None:
            return None
        return dt.datetime.fromtimestamp(self.watermark_ms / 1000, dt.UTC)

    def __getitem__(self, name: str) -> KeyedState:
        for target in self.targets:
            if target.schema.name == name:
                rows = None if self.stored is None else self.stored.get(name)
                if self.stored is not None and rows is None:
                    raise KeyError(f"no stored rows given for state {name!r}")
                lateness = self.event_time.allowed_lateness_seconds if self.event_time else 0
                return KeyedState(
                    target, self.version, rows, self.watermark_ms, lateness, self.tally, self.kept
                )
        raise KeyError(f"no state named {name!r}: spec.transform.state declares {list(self.names)}")

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.targets)

    @property
    def names(self) -> Sequence[str]:
        return [t.schema.name for t in self.targets]

    def at(
        self,
        version: int,
        watermark_ms: int | None = None,
        tally: Tally | None = None,
        kept: Kept | None = None,
    ) -> States:
        """The same states, as the batch of ``version`` reads them, with the watermark
        committed before it, its requests counted in ``tally`` and its lookups kept in
        ``kept``."""
        return replace(self, version=version, watermark_ms=watermark_ms, tally=tally, kept=kept)
