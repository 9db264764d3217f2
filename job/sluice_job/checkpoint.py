"""The checkpoint store: offsets in Cassandra, fenced by epoch and owner.

One row per pipeline holds the committed positions (JSON, each the *next* offset to
read, see ``offsets``), the last batch id, the epoch and a random per-process owner
id, and the format version of the row: plain data, so any code version resumes
from it. Every write to that row is a lightweight transaction (Paxos):

* ``claim(epoch)`` takes the pipeline only for an epoch newer than the stored one;
* ``plan`` writes the ranges of the next batch *before* it is read (write-ahead),
  so every batch id maps to exactly one set of ranges forever: a driver recovering
  after a crash, or a zombie still running, re-executes the same ranges, and
  outputs keyed by batch id are identical whoever writes them;
* ``commit`` applies only if owner, epoch and the previous batch id still match,
  so a driver whose claim was taken over can never commit again (it is *fenced*);
* ``letters_durable`` marks the planned batch's dead letters as durable, fenced like
  the plan, so a re-run of that batch does not write them again (``execute``);
* ``reset`` moves the positions for an offset reset (``reset``), fenced like a
  commit, once per reset id;
* ``release`` marks a clean stop.

The row's key is ``<cluster>/<namespace>/<name>`` (``sluice_api.cluster``), so two
Kubernetes clusters sharing a keyspace never share a row; a row keyed the legacy way
(``<namespace>/<name>``, before cluster ids) is adopted once by the first claim that
finds no row of its own (``adoption``).

An LWT is never retried after a timeout: a retried compare-and-set can apply twice.
The outcome of a timed-out commit is resolved by a SERIAL read, which also finishes
any Paxos round still in flight. Applied commits are recorded in a batch history
table (the audit trail), and each successful claim in a claims table. The history
row is written just after the commit; the checkpoint row also keeps the last
batch's ranges, so a driver that died in between has its row written by the next
driver's claim.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from cassandra import ConsistencyLevel, OperationTimedOut, WriteTimeout
from cassandra.cluster import NoHostAvailable, Session
from cassandra.query import PreparedStatement

from sluice_api import event_time
from sluice_job import checkpoint_schema, failpoints, logs, offsets
from sluice_job.adoption import Legacy, Step, next_step
from sluice_job.checkpoint_cql import statements
from sluice_job.checkpoint_rows import Batch as Batch  # re-exported for callers
from sluice_job.checkpoint_rows import Checkpoint as Checkpoint  # re-exported for callers
from sluice_job.offsets import OffsetRange

SCHEMA_VERSION: Final = 1
ROW_FORMAT: Final = 1
UNCERTAIN = (WriteTimeout, OperationTimedOut, NoHostAvailable)


class KeyspaceMissingError(Exception):
    """The checkpoint keyspace does not exist and may not be created (exit 2)."""


class FencedError(Exception):
    """A driver with a newer epoch owns the pipeline; this one must exit (code 3).
    ``held_by`` is the epoch that holds it, when known: the operator starts its next
    driver above it (a pipeline re-created under the same name finds the checkpoint
    of its earlier life, whose epochs its new status does not know)."""

    def __init__(self, message: str, held_by: int | None = None) -> None:
        super().__init__(message)
        self.held_by = held_by


class CheckpointError(Exception):
    """The checkpoint store is unusable or inconsistent (exit 1)."""


@dataclass
class CheckpointStore:
    session: Session
    keyspace: str
    pipeline: str
    """The key of this pipeline's rows (``sluice_api.cluster.checkpoint_key``)."""
    code_version: str
    history_ttl: int = 30 * 24 * 3600
    owner: uuid.UUID = field(default_factory=uuid.uuid4)
    legacy: str | None = None
    """The key the pipeline had before cluster ids, whose row ``claim`` adopts when
    there is no row under ``pipeline`` (``adoption``); ``None``: adopt nothing."""
    commit_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))
    _epoch: int | None = None
    _batch_id: int = 0
    _committed: Batch | None = None
    """The last batch this driver committed (its LWT applied)."""
    _statements: dict[str, PreparedStatement] = field(default_factory=dict)
    _applied_resets: frozenset[str] = frozenset()
    _event_watermark: int | None = None

    @property
    def event_watermark(self) -> int | None:
        """The event-time watermark (ms) as the last committed batch left it (from the
        claim on): what the next batch's records are measured against."""
        return self._event_watermark

    # -- schema ----------------------------------------------------------------

    def ensure_schema(self, create_with: str | None = None, *, pubsub: bool = False) -> None:
        """Create the tables, idempotently; refuse a schema written by a newer Sluice.

        The keyspace must exist, unless ``create_with`` gives the replication map to
        create it with (``checkpoint.cassandra.createKeyspace``): its replication
        decides whether the fencing row survives the loss of a node, so it is never
        chosen here."""
        ks = self.keyspace
        if not self._keyspace_exists():
            if create_with is None:
                raise KeyspaceMissingError(
                    f"checkpoint.cassandra.keyspace: keyspace {ks!r} does not exist; create "
                    f"it with the replication your cluster needs (e.g. CREATE KEYSPACE {ks} "
                    "WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3}) or "
                    "set checkpoint.cassandra.createKeyspace and checkpoint.cassandra.replication"
                )
            self.session.execute(
                f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {create_with}", timeout=60
            )
        for cql in checkpoint_schema.missing(ks, self._existing_tables(), pubsub=pubsub):
            self.session.execute(cql, timeout=60)
        self.session.execute(
            f"INSERT INTO {ks}.schema_version (component, version) VALUES ('checkpoint', %s)"
            " IF NOT EXISTS",
            (SCHEMA_VERSION,),
        )
        row = self.session.execute(
            f"SELECT version FROM {ks}.schema_version WHERE component = 'checkpoint'"
        ).one()
        if row.version > SCHEMA_VERSION:
            raise CheckpointError(
                f"checkpoint keyspace {ks} has schema version {row.version}; this driver "
                f"understands up to {SCHEMA_VERSION}: upgrade the job image"
            )
        self._prepare()

    def _existing_tables(self) -> dict[str, set[str]]:
        """The keyspace's tables and their columns, as ``system_schema`` lists them
        (readable by every role)."""
        rows = self.session.execute(
            "SELECT table_name, column_name FROM system_schema.columns WHERE keyspace_name = %s",
            (self.keyspace,),
        )
        tables: dict[str, set[str]] = {}
        for row in rows:
            tables.setdefault(row.table_name, set()).add(row.column_name)
        return tables

    def _keyspace_exists(self) -> bool:
        found = self.session.execute(
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s",
            (self.keyspace,),
        ).one()
        return found is not None

    # -- the fenced operations ---------------------------------------------------

    def claim(self, epoch: int) -> Checkpoint:
        """Take the pipeline for ``epoch``; raises :class:`FencedError` if the stored
        epoch is the same or newer. Safe to call again after an uncertain write: an
        earlier attempt of this driver that landed unseen counts as its claim."""
        adopted = self._adopt(epoch)
        self._backfill_history()
        now = _now()
        if not adopted:
            self._take(epoch, now)
        checkpoint = self.load(serial=True)
        if checkpoint.owner != self.owner:
            raise FencedError(f"pipeline {self.pipeline} was claimed by a newer epoch")
        self._epoch, self._batch_id = epoch, checkpoint.batch_id
        self._applied_resets = checkpoint.resets
        self._event_watermark = checkpoint.event_watermark
        self.session.execute(
            self._statements["claim_log"],
            (self.pipeline, epoch, self.owner, self.code_version, checkpoint.batch_id, now),
        )
        if checkpoint.batch_id > 0:
            # The status shows it from the claim on (the operator reads it from the
            # driver's metrics), not only from this driver's first commit.
            checkpoint = replace(checkpoint, committed_at=self.committed_at(checkpoint.batch_id))
        return checkpoint

    def _take(self, epoch: int, now: datetime) -> None:
        inserted = self._lwt(
            "insert",
            (self.pipeline, ROW_FORMAT, epoch, self.owner, 0, "{}", self.code_version, now),
        )
        if inserted.was_applied:
            return
        if self._lwt("claim", (epoch, self.owner, now, self.pipeline, epoch)).was_applied:
            return
        current = self.load(serial=True)
        if current.owner != self.owner or current.epoch != epoch:
            raise FencedError(
                f"pipeline {self.pipeline} is held by epoch {current.epoch} "
                f"(this driver has epoch {epoch})",
                held_by=current.epoch,
            )

    # -- adopting a legacy row (see ``adoption``) -------------------------------

    def _adopt(self, epoch: int) -> bool:
        """Adopt the legacy row if this key has none; whether this driver's row was
        made by it (then the claim is done)."""
        if self.legacy is None or self._row(self.pipeline) is not None:
            return False
        for _ in range(3):  # a refused fence is decided again from what it saw
            legacy = self._row(self.legacy)
            step = next_step(False, _legacy(legacy), self.pipeline, self.owner, epoch)
            if step is Step.FENCE:
                if not self._fence_legacy(epoch, legacy.adopted_by):
                    continue
                step = Step.COPY
            return self._after(step, epoch, legacy)
        raise CheckpointError(f"legacy checkpoint {self.legacy} kept changing under adoption")

    def _after(self, step: Step, epoch: int, before: Any) -> bool:
        if step is Step.NOTHING:
            return False
        if step is Step.ELSEWHERE:
            logs.event(
                "legacy checkpoint adopted elsewhere",
                level=30,
                legacy=self.legacy,
                adopted_by=before.adopted_by,
                key=self.pipeline,
                message="another cluster adopted the legacy row; this one starts afresh",
            )
            return False
        if step is Step.FENCED:
            raise FencedError(
                f"legacy checkpoint {self.legacy} is held by epoch {before.epoch} "
                f"(this driver has epoch {epoch})",
                held_by=int(before.epoch),
            )
        return self._copy_legacy(epoch, before)

    def _fence_legacy(self, epoch: int, adopted_by: str | None) -> bool:
        params = (epoch, self.owner, self.pipeline, _now(), self.legacy, epoch, adopted_by)
        return bool(self._lwt("legacy_fence", params).was_applied)

    def _copy_legacy(self, epoch: int, before: Any) -> bool:
        """Copy the fenced legacy row (read again: it no longer moves) and its last
        history row under this key."""
        row = self._row(self.legacy or "")
        if row is None:  # deleted meanwhile (a checkpoint reset by hand): nothing to adopt
            return False
        if row.owner != self.owner or row.epoch != epoch:
            # A newer driver of this cluster fenced it meanwhile and copies it: making
            # a fresh row here would have it resume from nothing.
            raise FencedError(
                f"legacy checkpoint {self.legacy} was taken over by epoch {row.epoch} "
                f"(this driver has epoch {epoch})",
                held_by=int(row.epoch),
            )
        if row.format > ROW_FORMAT:
            raise CheckpointError(
                f"legacy checkpoint {self.legacy} has row format {row.format}; this driver "
                f"reads up to {ROW_FORMAT}: upgrade the job image"
            )
        params = (
            *(self.pipeline, row.format, epoch, self.owner, row.batch_id, row.offsets),
            *(row.code_version, _now(), row.planned_id, row.planned, row.last_ranges),
            *(row.last_records, row.last_started_at, row.write_version, row.applied_resets),
            *(row.last_reset, self.legacy),
        )
        inserted = bool(self._lwt("adopt", params).was_applied)
        if inserted:
            self._copy_last_history(row.batch_id)
            logs.event(
                "adopted legacy checkpoint",
                legacy=self.legacy,
                key=self.pipeline,
                epoch=epoch,
                held_by_epoch=before.epoch,
                batch_id=row.batch_id,
                offsets=json.loads(row.offsets),
            )
        return inserted

    def _copy_last_history(self, batch_id: int) -> None:
        """The history row of the adopted batch, as its driver wrote it (the claim's
        backfill writes it from the row when that driver died before writing it)."""
        statement = self._statements["history_row"]
        found = self.session.execute(statement, (self.legacy, batch_id)).one()
        if found is None:
            return
        self._record(
            found.batch_id,
            found.epoch,
            found.owner,
            found.code_version or "",
            found.ranges,
            found.records or 0,
            found.started_at,
            found.committed_at,
            lost=found.lost,
            reset=found.reset,
        )

    def _row(self, key: str) -> Any:
        return self.session.execute(self._statements["adoption_load"], (key,)).one()

    def plan(self, batch: Batch) -> None:
        """Write ahead the ranges of the next batch, before reading them."""
        epoch = self._require_next(batch)
        params = (batch.batch_id, batch.to_json(), self.pipeline, self.owner, epoch, self._batch_id)
        if not self._fenced("plan", params, lambda current: current.planned == batch):
            self._raise_lost_ownership(batch.batch_id)

    def letters_durable(self, batch: Batch) -> None:
        """Record that the dead letters of ``batch``, the planned batch, are durable, so
        that a re-run of it (a driver recovering it) does not write them again. Fenced
        like the plan; the marker holds the batch id, so the next plan does not
        inherit it."""
        epoch = self._require_next(batch)
        params = (batch.batch_id, self.pipeline, self.owner, epoch, self._batch_id, batch.batch_id)
        if not self._fenced("letters", params, lambda c: _letters_durable(c, batch.batch_id)):
            self._raise_lost_ownership(batch.batch_id)

    def still_held(self, batch: Batch) -> None:
        """Raise :class:`FencedError` if the row names another owner or epoch than this
        driver's claim: a newer driver took the pipeline while ``batch`` ran. One read
        (not serial: a claim that completed is seen, one in progress may not be; the
        fence on the commit decides in the end), before the batch sends its dead
        letters, so that a fenced driver's batch does not send the letters its
        successor sends again."""
        epoch = self._require_claim()
        current = self.load()
        if current.owner != self.owner or current.epoch != epoch:
            raise FencedError(
                f"batch {batch.batch_id} stopped before its dead letters: pipeline "
                f"{self.pipeline} is now held by epoch {current.epoch} (this driver has "
                f"epoch {epoch})",
                held_by=current.epoch,
            )

    def commit(self, batch: Batch, started_at: datetime) -> float:
        """Record ``batch`` as done: positions move on, only if we still own the
        pipeline and ``batch`` follows the last committed batch. Returns the seconds
        the commit LWT took (the history row that follows is not part of it).

        Safe to call again for the same batch after an outage: a batch this driver
        already committed (the LWT applied, the history row did not) only gets its
        history row, and an LWT that applied unseen is recognised by a serial read."""
        if self._committed == batch:
            self._record_committed(batch, self._require_claim(), started_at)
            return 0.0
        epoch = self._require_next(batch)
        started = time.perf_counter()
        params = (
            batch.batch_id,
            json.dumps(offsets.to_json(batch.positions)),
            self.code_version,
            _now(),
            json.dumps(offsets.ranges_json(batch.ranges)),
            batch.records,
            started_at,
            batch.version,
            watermark := event_time.later(self._event_watermark, batch.event_watermark),
            self.pipeline,
            self.owner,
            epoch,
            self._batch_id,
        )
        applied = self._fenced("commit", params, lambda c: c.batch_id == batch.batch_id)
        lwt = time.perf_counter() - started
        self.commit_seconds.append(lwt)
        if not applied:
            self._raise_lost_ownership(batch.batch_id)
        self._batch_id, self._committed = batch.batch_id, batch
        self._event_watermark = watermark
        failpoints.phase("after_commit", batch.batch_id)
        self._record_committed(batch, epoch, started_at)
        return lwt

    def _record_committed(self, batch: Batch, epoch: int, started_at: datetime) -> None:
        lost = [OffsetRange(s.tp, s.committed, s.resumed_at) for s in batch.lost]
        self._record(
            batch.batch_id,
            epoch,
            self.owner,
            self.code_version,
            json.dumps(offsets.ranges_json(batch.ranges)),
            batch.records,
            started_at,
            lost=json.dumps(offsets.ranges_json(lost)) if lost else None,
        )

    def reset(self, batch: Batch, reset_id: str, record: str) -> None:
        """Move the positions as an offset reset asks: ``batch`` follows the last
        committed batch, reads nothing and commits the new positions; ``record`` (JSON:
        what was asked, by whom, the move) goes to its history row. Fenced like a
        commit; a planned batch is dropped. Safe to call again after an outage."""
        if reset_id in self._applied_resets:
            return
        epoch = self._require_next(batch)
        now = _now()
        params = (
            batch.batch_id,
            json.dumps(offsets.to_json(batch.positions)),
            self.code_version,
            now,
            now,
            batch.version,
            record,
            {reset_id},
            self.pipeline,
            self.owner,
            epoch,
            self._batch_id,
        )
        if not self._fenced("reset", params, lambda current: reset_id in current.resets):
            self._raise_lost_ownership(batch.batch_id)
        self._batch_id, self._committed = batch.batch_id, batch
        self._applied_resets = self._applied_resets | {reset_id}
        self._record(
            batch.batch_id, epoch, self.owner, self.code_version, "{}", 0, now, reset=record
        )

    def release(self) -> bool:
        """Mark a clean stop; ``False`` if a newer epoch took over meanwhile."""
        epoch = self._require_claim()
        result = self._lwt("release", (_now(), self.pipeline, self.owner, epoch))
        return bool(result.was_applied)

    def load(self, *, serial: bool = False) -> Checkpoint:
        statement = self._statements["load_serial" if serial else "load"]
        row = self.session.execute(statement, (self.pipeline,)).one()
        if row is None:
            return Checkpoint(0, {}, 0, None, "", released=False)
        if row.format > ROW_FORMAT:
            raise CheckpointError(
                f"checkpoint of {self.pipeline} has row format {row.format}; this driver "
                f"reads up to {ROW_FORMAT}: upgrade the job image"
            )
        return Checkpoint(
            batch_id=row.batch_id,
            positions=offsets.from_json(json.loads(row.offsets)),
            epoch=row.epoch,
            owner=row.owner,
            code_version=row.code_version or "",
            released=bool(row.released),
            planned=(
                replace(
                    Batch.from_json(row.planned_id, row.planned),
                    letters_durable=row.letters_durable == row.planned_id,
                )
                if row.planned and row.planned_id == row.batch_id + 1
                else None
            ),
            version=row.write_version or 0,
            resets=frozenset(row.applied_resets or ()),
            event_watermark=row.event_watermark,
        )

    def committed_at(self, batch_id: int) -> datetime | None:
        """When batch ``batch_id`` was committed, from its history row (if written)."""
        row = self.session.execute(self._statements["history_row"], (self.pipeline, batch_id)).one()
        if row is None or row.committed_at is None:
            return None
        stamp: datetime = row.committed_at
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)

    def history(self, limit: int = 1000) -> list[Any]:
        return list(self.session.execute(self._statements["history"], (self.pipeline, limit)))

    # -- internals --------------------------------------------------------------

    def _raise_lost_ownership(self, batch_id: int) -> None:
        current = self.load(serial=True)
        if current.owner != self.owner or current.epoch != self._epoch:
            raise FencedError(
                f"commit of batch {batch_id} refused: pipeline {self.pipeline} is now held "
                f"by epoch {current.epoch} (this driver has epoch {self._epoch})",
                held_by=current.epoch,
            )
        raise CheckpointError(
            f"batch {batch_id} not applied: the stored batch id is {current.batch_id}, "
            f"this driver expected {batch_id - 1} (an uncertain write did not apply)"
        )

    def _record(
        self,
        batch_id: int,
        epoch: int,
        owner: uuid.UUID,
        code_version: str,
        ranges: str,
        records: int,
        started_at: datetime,
        committed_at: datetime | None = None,
        lost: str | None = None,
        reset: str | None = None,
    ) -> None:
        self.session.execute(
            self._statements["history_insert"],
            (
                self.pipeline,
                batch_id,
                epoch,
                owner,
                code_version,
                ranges,
                records,
                started_at,
                committed_at or _now(),
                lost,
                reset,
                self.history_ttl,
            ),
        )

    def _backfill_history(self) -> None:
        """Write the history row of the last committed batch if its driver died
        between commit and history write (idempotent)."""
        row = self.session.execute(self._statements["last_batch"], (self.pipeline,)).one()
        if row is None or not row.batch_id or row.last_ranges is None:
            return
        latest = self.session.execute(self._statements["history"], (self.pipeline, 1)).one()
        if latest is not None and latest.batch_id >= row.batch_id:
            return
        self._record(
            row.batch_id,
            row.epoch,
            row.owner,
            row.code_version or "",
            row.last_ranges,
            row.last_records or 0,
            row.last_started_at,
            row.updated_at,
            reset=row.last_reset,
        )

    def _require_next(self, batch: Batch) -> int:
        if batch.batch_id != self._batch_id + 1:
            raise CheckpointError(f"batch {batch.batch_id} does not follow {self._batch_id}")
        return self._require_claim()

    def _require_claim(self) -> int:
        if self._epoch is None:
            raise CheckpointError("claim() must succeed before commit() or release()")
        return self._epoch

    def _fenced(
        self, name: str, params: Sequence[object], landed: Callable[[Checkpoint], bool]
    ) -> bool:
        """Run the LWT ``name``; whether it applied. An LWT is never retried: when its
        outcome is uncertain, or it did not apply, a serial read tells whether an
        earlier attempt of this driver applied it unseen (``landed``)."""
        try:
            if self._lwt(name, params).was_applied:
                return True
        except UNCERTAIN:
            pass
        current = self.load(serial=True)
        return current.owner == self.owner and landed(current)

    def _lwt(self, name: str, params: Sequence[object]) -> Any:
        return self.session.execute(self._statements[name], params)

    def _prepare(self) -> None:
        for name, cql in statements(self.keyspace).items():
            self._statements[name] = self.session.prepare(cql)
        for name in ("load_serial", "adoption_load"):
            self._statements[name].consistency_level = ConsistencyLevel.SERIAL


def _letters_durable(current: Checkpoint, batch_id: int) -> bool:
    planned = current.planned
    return planned is not None and planned.batch_id == batch_id and planned.letters_durable


def _legacy(row: Any) -> Legacy | None:
    if row is None:
        return None
    return Legacy(int(row.epoch or 0), row.owner, row.adopted_by)


def _now() -> datetime:
    return datetime.now(UTC)
