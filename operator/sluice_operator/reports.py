"""What the running driver reports about itself (its ``/metrics``, read by
``progress``), folded into the status: its last commit, its lag, the dependencies it
waits for, records lost to retention, partitions read again after a recreated topic.
Reports of another epoch's driver are ignored; each returns the status unchanged when
there is nothing new to say."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from sluice_operator import changes
from sluice_operator.actions import Emit
from sluice_operator.conditions import says, set_condition
from sluice_operator.model import (
    AppliedReset,
    GoodSpec,
    Lag,
    LastCommit,
    Observed,
    PodView,
    Status,
)
from sluice_operator.progress import DriverProgress


def with_progress(status: Status, pod: PodView, obs: Observed, interval: float) -> Status:
    """The running driver's word on the checkpoint (:func:`follow`); reports of
    another epoch's driver than the pod's are ignored."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch:
        return status
    shown = follow(status.last_commit, report, interval)
    return status if shown == status.last_commit else replace(status, last_commit=shown)


def follow(known: LastCommit | None, report: DriverProgress, interval: float) -> LastCommit | None:
    """The last commit the status shows once ``report`` is heard; a purely
    computational function. The checkpoint is the truth, and the newest epoch speaks
    for it: a driver reports the checkpoint's last batch from its claim on, whichever
    epoch committed it (a partitioned driver's commits, unseen by the operator,
    included). So a report of an epoch newer than the one ``known`` came from replaces
    it at once, even with a lower batch (or none: nothing committed); one of an older
    epoch (a fenced driver) never does; within an epoch the batch only moves forward,
    at most every ``interval`` seconds of commit time."""
    if known is not None and known.epoch is not None and report.epoch < known.epoch:
        return known
    newer = known is None or known.epoch is None or report.epoch > known.epoch
    if report.batch_id is None:
        return None if newer and report.claimed else known
    if report.committed_at is None:  # its history row is missing: say nothing
        return known
    heard = LastCommit(report.batch_id, report.committed_at.isoformat(), report.epoch)
    if known is None or newer:
        return heard
    if report.batch_id <= known.batch_id:
        return known
    if (report.committed_at - _aware(known.time)).total_seconds() < interval:
        return known
    return heard


def with_lag(status: Status, pod: PodView, obs: Observed, interval: float) -> Status:
    """The running driver's lag, when it differs from the stored one and that is at
    least ``interval`` seconds old (one status write per interval while it moves, none
    while it stays); reports of another epoch's driver are ignored."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch or report.lag is None:
        return status
    known = status.lag
    if known is not None:
        if (known.records, known.oldest_age) == (report.lag, report.oldest_age):
            return status
        if (obs.now - _aware(known.time)).total_seconds() < interval:
            return status
    return replace(status, lag=Lag(report.lag, obs.now.isoformat(), report.oldest_age))


def _committed_itself(report: DriverProgress) -> bool:
    """The driver committed a batch itself: its reported batch is not only the one it
    found in the checkpoint when it claimed (an older epoch's). A report without its
    count of commits (``None``) is taken at its batch's word."""
    return report.batch_id is not None and report.committed_at is not None and report.commits != 0


def _aware(stamp: str) -> datetime:
    moment = datetime.fromisoformat(stamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


DEPENDENCIES: Final = "DependenciesAvailable"


def with_dependencies(status: Status, pod: PodView, obs: Observed) -> tuple[Status, list[Emit]]:
    """The ``DependenciesAvailable`` condition from the running driver's own report: a
    driver waiting out an outage (Cassandra, Kafka, Datastore) is not failing, so the
    pipeline stays Running and says what it waits for; an Event marks each change."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch:
        return status, []
    previous = next((c for c in status.conditions if c.get("type") == DEPENDENCIES), None)
    if report.unavailable:
        names = ", ".join(report.unavailable)
        value, reason = "False", "Waiting"
        message = f"waiting for {names}: the driver keeps its batch and retries by itself"
        told = [Emit("Warning", "DependencyUnavailable", f"{pod.name}: {message}")]
    else:
        value, reason, message = "True", "Reachable", "every dependency answers"
        told = [Emit("Normal", "DependencyBack", f"{pod.name}: {message}")] if previous else []
    if previous is not None and previous.get("status") == value:
        told = []
    if previous is None and value == "True":
        return status, []
    conditions = set_condition(status, DEPENDENCIES, value, reason, message, obs)
    return replace(status, conditions=conditions), told


LOSSES: Final = "RecordsLost"


def with_losses(status: Status, pod: PodView, obs: Observed) -> tuple[Status, list[Emit]]:
    """A ``RecordsLost`` condition and Event when the running driver reports records
    that retention deleted before they were read (``onOffsetOutOfRange: earliest``),
    naming partitions and counts; a new Event whenever the count grows."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch or not report.lost:
        return status, []
    message = (
        "records deleted before they were read (retention, or a recreated topic): "
        + ", ".join(f"{where} {count}" for where, count in report.lost)
    )
    previous = next((c for c in status.conditions if c.get("type") == LOSSES), None)
    if says(previous, message):
        return status, []
    conditions = set_condition(status, LOSSES, "True", "RetentionDeleted", message, obs)
    return replace(status, conditions=conditions), [Emit("Warning", "RecordsLost", message)]


RESETS: Final = "OffsetOutOfRange"


def with_resets(status: Status, pod: PodView, obs: Observed) -> tuple[Status, list[Emit]]:
    """An ``OffsetOutOfRange`` condition and Event when the running driver found its
    checkpoint beyond a partition's end (the topic was deleted and recreated, or the
    partition truncated) and read it again from its earliest offset
    (``onOffsetOutOfRange: earliest``), naming partition and offsets."""
    report = obs.progress
    resets = [r for r in report.resets if r.times] if report and report.epoch == pod.epoch else []
    if not resets:
        return status, []
    message = "committed offset beyond the end of the partition (topic recreated or " + (
        "truncated): "
        + ", ".join(
            f"{r.where} committed {r.committed}, read again from {r.resumed_at}" for r in resets
        )
    )
    previous = next((c for c in status.conditions if c.get("type") == RESETS), None)
    if says(previous, message):
        return status, []
    conditions = set_condition(status, RESETS, "True", "BeyondEndOffset", message, obs)
    return replace(status, conditions=conditions), [Emit("Warning", RESETS, message)]


def with_good(status: Status, pod: PodView, obs: Observed) -> Status:
    """The current spec becomes the last good one once its driver commits a batch."""
    report = obs.progress
    if report is None or report.epoch != pod.epoch or obs.spec is None:
        return status
    if not _committed_itself(report) or status.spec_hash is None:
        return status
    if status.last_good is not None and status.last_good.spec_hash == status.spec_hash:
        return status
    if changes.spec_hash(obs.spec) != status.spec_hash:
        return status  # the driver runs an older spec: it is about to be replaced
    view = json.dumps(changes.driver_view(obs.spec), sort_keys=True)
    return replace(status, last_good=GoodSpec(status.spec_hash, status.image or "", view))


def with_offset_reset(status: Status, pod: PodView, obs: Observed) -> tuple[Status, list[Emit]]:
    """``status.offsetReset`` and an ``OffsetReset`` Event once a driver of the spec
    that asks for a reset commits: the driver applies the reset (or finds it applied)
    right after its claim, before anything else, and reports it as a commit."""
    report, spec = obs.progress, obs.spec
    if spec is None or spec.offset_reset is None or report is None or report.epoch != pod.epoch:
        return status, []
    if not _committed_itself(report) or report.committed_at is None:
        return status, []
    asked = spec.offset_reset
    if status.offset_reset is not None and status.offset_reset.id == asked.id:
        return status, []
    if changes.spec_hash(spec) != status.spec_hash:
        return status, []  # the driver runs an older spec: it is about to be replaced
    applied = AppliedReset(asked.id, asked.to.value, pod.epoch, report.committed_at.isoformat())
    where = f" {asked.timestamp}" if asked.timestamp else ""
    who = f" requested by {asked.requested_by}" if asked.requested_by else ""
    why = f": {asked.reason}" if asked.reason else ""
    message = f"offset reset {asked.id} to {asked.to.value}{where} in effect under epoch "
    message += f"{pod.epoch}{who}{why}"
    return replace(status, offset_reset=applied), [Emit("Normal", "OffsetReset", message)]
