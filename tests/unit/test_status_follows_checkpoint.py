"""The status's last commit follows the checkpoint across epochs (issue 39, item 8):
after a node partition ``kubectl get sp`` showed batch 10 while the checkpoint held
batch 17 of epoch 3. A driver says what the checkpoint holds from its claim on; the
operator takes the newest epoch's word at once, and never a fenced driver's."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import generate_latest

from sluice_api.exitcodes import ExitCode
from sluice_api.termination import Termination
from sluice_job.checkpoint import Batch, Checkpoint
from sluice_job.metrics import PrometheusObserver
from sluice_job.offsets import OffsetRange, TopicPartition
from sluice_job.ports import Committed
from sluice_operator import changes, naming
from sluice_operator.actions import Decision, WriteStatus
from sluice_operator.decide import decide
from sluice_operator.model import LastCommit, Phase, PodPhase, PodView, Status
from sluice_operator.progress import DriverProgress, parse
from tests.support.observations import NOW, observed, spec

pytestmark = pytest.mark.unit
TP0 = TopicPartition("orders", 0)
SHOWN = NOW - timedelta(seconds=60)
"""When the status's last commit (batch 10, epoch 2) was committed."""


def driver(epoch: int) -> tuple[Status, PodView]:
    """The pipeline after the operator started ``epoch``'s driver; the status still
    shows batch 10 of epoch 2."""
    pod = PodView(
        naming.driver_pod("kpis", epoch),
        epoch,
        PodPhase.RUNNING,
        "n2",
        running_since=NOW - timedelta(seconds=30),
        ip="10.0.0.7",
    )
    status = Status(
        phase=Phase.RUNNING,
        epoch=epoch,
        driver_pod=pod.name,
        image="sluice-job:v1",
        spec_hash=changes.spec_hash(spec()),
        last_commit=LastCommit(10, SHOWN.isoformat(), epoch=2),
    )
    return status, pod


def shown(decision: Decision, before: Status) -> LastCommit | None:
    writes = [a.status for a in decision.actions if isinstance(a, WriteStatus)]
    return writes[-1].last_commit if writes else before.last_commit


def report(epoch: int, batch: int | None, at: datetime | None, **kw: Any) -> DriverProgress:
    return DriverProgress(epoch, batch_id=batch, committed_at=at, lag=0, **kw)


# -- the operator ---------------------------------------------------------------------


def test_a_takeover_shows_the_checkpoint_it_claimed_at_once() -> None:
    """The partitioned driver committed 11..17 unseen (its node unreachable), a few
    seconds after the status's batch 10; the new epoch's claim reports 17."""
    status, pod = driver(epoch=3)
    claimed = report(3, 17, SHOWN + timedelta(seconds=3), claimed=True)
    commit = shown(decide(observed(status, (pod,), progress=claimed)), status)
    assert commit == LastCommit(17, claimed.committed_at.isoformat(), epoch=3)  # type: ignore[union-attr]


def test_a_new_epoch_that_finds_nothing_committed_clears_a_stale_last_commit() -> None:
    status, pod = driver(epoch=3)
    empty = report(3, None, None, claimed=True)
    assert shown(decide(observed(status, (pod,), progress=empty)), status) is None


def test_the_newest_epochs_checkpoint_wins_even_below_what_the_status_shows() -> None:
    """A checkpoint is the truth: a status ahead of it (a checkpoint made again) follows."""
    status, pod = driver(epoch=3)
    claimed = report(3, 4, NOW - timedelta(seconds=2), claimed=True)
    commit = shown(decide(observed(status, (pod,), progress=claimed)), status)
    assert commit is not None
    assert (commit.batch_id, commit.epoch) == (4, 3)


def test_a_driver_that_has_not_claimed_yet_leaves_the_status_alone() -> None:
    status, pod = driver(epoch=3)
    starting = report(3, None, None)
    assert shown(decide(observed(status, (pod,), progress=starting)), status) == status.last_commit


def test_a_fenced_drivers_report_never_moves_the_status() -> None:
    """The status names the epoch-2 pod (an operator that lags behind), but batch 17
    came from epoch 3: whatever epoch 2 says, even a higher batch, is not shown."""
    status, pod = driver(epoch=2)
    status = replace(status, last_commit=LastCommit(17, SHOWN.isoformat(), epoch=3))
    for batch in (12, 17, 18):
        zombie = report(2, batch, NOW, claimed=True)
        after = shown(decide(observed(status, (pod,), progress=zombie)), status)
        assert after == status.last_commit


def test_a_fenced_drivers_exit_does_not_rewrite_the_newer_epochs_commit() -> None:
    status, pod = driver(epoch=2)
    status = replace(status, last_commit=LastCommit(17, SHOWN.isoformat(), epoch=3))
    message = Termination(ExitCode.FENCED, "Fenced", "", last_batch_id=17, held_by_epoch=3)
    ended = replace(
        pod,
        phase=PodPhase.FAILED,
        exit_code=int(ExitCode.FENCED),
        message=message.to_json(),
        finished_at=NOW,
    )
    after = shown(decide(observed(status, (ended,))), status)
    assert after == status.last_commit


def test_within_an_epoch_the_batch_only_moves_forward() -> None:
    status, pod = driver(epoch=3)
    status = replace(status, last_commit=LastCommit(17, SHOWN.isoformat(), epoch=3))
    older = report(3, 15, NOW, claimed=True)
    assert shown(decide(observed(status, (pod,), progress=older)), status) == status.last_commit


def test_a_driver_that_only_claimed_has_not_made_its_spec_good() -> None:
    """The checkpoint's batch it reports from its claim was committed by an older
    epoch: an upgrade whose driver fails every batch must still roll back."""
    status, pod = driver(epoch=3)
    claimed = report(3, 17, NOW - timedelta(seconds=2), claimed=True, commits=0)
    after = written_status(decide(observed(status, (pod,), progress=claimed)))
    assert after.last_commit is not None
    assert after.last_commit.batch_id == 17
    assert after.last_good is None
    committed = report(3, 18, NOW - timedelta(seconds=1), claimed=True, commits=1)
    assert written_status(decide(observed(after, (pod,), progress=committed))).last_good


def written_status(decision: Decision) -> Status:
    return [a.status for a in decision.actions if isinstance(a, WriteStatus)][-1]


# -- the driver's side of it -----------------------------------------------------------


def test_a_driver_exports_the_checkpoint_it_claimed_before_its_first_commit() -> None:
    pipeline = f"ns-{uuid.uuid4().hex[:6]}/kpis"
    observer = PrometheusObserver(pipeline)
    observer.started("sluice-job:v1", epoch=3)
    assert parse(generate_latest().decode(), pipeline) == DriverProgress(
        3, None, None, None, commits=0
    )

    committed_at = datetime(2026, 11, 28, 17, 0, 3, tzinfo=UTC)
    observer.resumed(Checkpoint(17, {TP0: 900}, 3, None, "v1", False, committed_at=committed_at))
    claimed = parse(generate_latest().decode(), pipeline)
    assert claimed is not None
    assert (claimed.epoch, claimed.batch_id, claimed.committed_at) == (3, 17, committed_at)
    assert claimed.claimed
    assert claimed.commits == 0

    batch = Batch(18, (OffsetRange(TP0, 900, 950),), {TP0: 950})
    observer.committed(Committed(batch, None, commit_seconds=0.01, batch_seconds=0.2))
    after = parse(generate_latest().decode(), pipeline)
    assert after is not None
    assert (after.batch_id, after.commits) == (18, 1)


def test_a_driver_that_claims_an_empty_checkpoint_says_so() -> None:
    pipeline = f"ns-{uuid.uuid4().hex[:6]}/kpis"
    observer = PrometheusObserver(pipeline)
    observer.started("sluice-job:v1", epoch=1)
    observer.resumed(Checkpoint(0, {}, 1, None, "", False))
    claimed = parse(generate_latest().decode(), pipeline)
    assert claimed is not None
    assert (claimed.batch_id, claimed.committed_at, claimed.claimed) == (None, None, True)
