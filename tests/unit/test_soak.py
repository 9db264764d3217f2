"""The soak's pure parts: the seeded schedule, the recovery statistics, the ledger of
committed and aborted records, and the checks of the batch chain, sink and dead
letters (``sluice_dev.soak``)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from sluice_api.replacement import UpgradeMode
from sluice_api.spec import PipelineSpec
from sluice_dev.events import EventFactory
from sluice_dev.soak import checks, ledger, recovery, report, run, schedule
from sluice_dev.soak.manifest import Target, manifest
from sluice_dev.soak.schedule import FAULT_KINDS, FaultKind
from tests.support import expected

pytestmark = pytest.mark.unit


# -- schedule -------------------------------------------------------------------------


def test_schedule_has_every_kind_the_spec_changes_and_is_the_same_for_a_seed() -> None:
    steps = schedule.plan(12, 21, spec_changes=2, duration=1_400)
    kinds = Counter(s.kind for s in steps)
    assert len(steps) == 23
    assert kinds[FaultKind.SPEC_CHANGE] == 2
    assert set(kinds) == set(FaultKind), "every kind of fault at least once"
    assert [s.number for s in steps] == list(range(1, 24))
    assert steps == schedule.plan(12, 21, spec_changes=2, duration=1_400)
    assert steps != schedule.plan(13, 21, spec_changes=2, duration=1_400)


def test_schedule_spreads_the_steps_over_the_run_in_order() -> None:
    steps = schedule.plan(3, 6, spec_changes=1, duration=700)
    dues = [s.due for s in steps]
    assert dues == sorted(dues)
    assert dues[0] > 0
    assert dues[-1] < 700
    assert steps[0].due == pytest.approx(100, abs=25)


def test_schedule_draws_only_the_kinds_asked_for() -> None:
    kinds = (FaultKind.DRIVER_KILL, FaultKind.KAFKA_RESTART)
    steps = schedule.plan(5, 2, spec_changes=1, kinds=kinds, duration=300)
    assert sorted(s.kind for s in steps) == sorted([*kinds, FaultKind.SPEC_CHANGE])


def test_only_faults_that_take_the_driver_away_need_a_new_driver() -> None:
    assert {k for k in FaultKind if k.replaces_driver} == {
        FaultKind.POD_DELETE,
        FaultKind.DRIVER_KILL,
        FaultKind.NODE_PARTITION,
        FaultKind.NODE_CRASH,
        FaultKind.SPEC_CHANGE,
    }
    assert FaultKind.SPEC_CHANGE not in FAULT_KINDS


# -- recovery ---------------------------------------------------------------------------


def fault(kind: FaultKind, started: float, cleared: float, epoch: int = 1) -> recovery.Fault:
    return recovery.Fault(1, kind, started, cleared, epoch)


def test_a_new_driver_must_commit_to_end_a_fault_that_took_the_driver_away() -> None:
    commits = [
        recovery.Commit(10, 1, 101.0),  # the old driver finishing the batch in hand
        recovery.Commit(11, 2, 130.0),
        recovery.Commit(12, 2, 131.0),
    ]
    claims = [recovery.Claim(2, 122.0)]
    found = recovery.recovery(fault(FaultKind.DRIVER_KILL, 100.0, 100.0), commits, claims)
    assert found.commit == commits[1]
    assert found.seconds == pytest.approx(29.0)  # no commit from 101 to 130
    assert found.replaced == pytest.approx(30.0)
    assert found.to_claim == pytest.approx(22.0)
    assert "next commit after   29.0s (batch 11, epoch 2)" in found.line()
    assert "new driver's first commit 30.0s after the fault" in found.line()


def test_a_driver_that_goes_on_committing_after_the_fault_stalls_only_the_handover_gap() -> None:
    # A warm handover: v1 commits until v2's standby is ready (60 s), v2 commits 1.5 s
    # after v1's last commit; a partitioned node's driver the same until it is fenced.
    commits = [recovery.Commit(b, 1, 100.0 + 2 * (b - 10)) for b in range(10, 41)]
    commits.append(recovery.Commit(41, 2, 161.5))
    found = recovery.recovery(fault(FaultKind.SPEC_CHANGE, 100.5, 100.5), commits)
    assert found.commit == commits[-1]
    assert (found.seconds, found.replaced) == (pytest.approx(1.5), pytest.approx(61.0))


def test_a_dependency_fault_ends_with_the_first_commit_after_it_is_over() -> None:
    commits = [recovery.Commit(10, 1, 105.0), recovery.Commit(11, 1, 131.0)]
    found = recovery.recovery(fault(FaultKind.CASSANDRA_STOP, 100.0, 124.0), commits)
    assert found.commit == commits[1]
    assert found.seconds == pytest.approx(31.0)
    assert found.claim is None
    assert "over after 24.0s" in found.line()


def test_a_fault_without_a_qualifying_commit_is_not_recovered() -> None:
    found = recovery.recovery(
        fault(FaultKind.POD_DELETE, 100.0, 100.0), [recovery.Commit(10, 1, 150.0)]
    )
    assert found.commit is None
    assert found.seconds is None
    assert "NOT RECOVERED" in found.line()


def test_percentile_is_nearest_rank() -> None:
    assert recovery.percentile([5.0], 50) == 5.0
    assert recovery.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.0
    assert recovery.percentile([1.0, 2.0, 3.0], 50) == 2.0
    assert recovery.percentile([1.0, 2.0, 3.0], 100) == 3.0


def test_statistics_per_kind_give_p50_and_max_and_count_the_unrecovered() -> None:
    def done(kind: FaultKind, seconds: float | None) -> recovery.Recovery:
        commit = None if seconds is None else recovery.Commit(1, 2, 100.0 + seconds)
        return recovery.Recovery(fault(kind, 100.0, 100.0), commit)

    stats = recovery.per_kind(
        [
            done(FaultKind.DRIVER_KILL, 30.0),
            done(FaultKind.KAFKA_RESTART, 12.0),
            done(FaultKind.DRIVER_KILL, 10.0),
            done(FaultKind.DRIVER_KILL, 50.0),
            done(FaultKind.DRIVER_KILL, None),
        ]
    )
    kill, restart = stats
    assert (kill.kind, kill.count, kill.recovered) == (FaultKind.DRIVER_KILL, 4, 3)
    assert (kill.p50, kill.max) == (pytest.approx(30.0), pytest.approx(50.0))
    assert (restart.count, restart.p50, restart.max) == (1, 12.0, 12.0)
    assert "p50   30.0s  max   50.0s" in kill.line()


def test_the_load_average_during_each_fault_is_printed_with_it_and_per_kind() -> None:
    def done(seconds: float, load: float) -> recovery.Recovery:
        busy = replace(fault(FaultKind.NODE_PARTITION, 100.0, 100.0), load=load)
        return recovery.Recovery(busy, recovery.Commit(1, 2, 100.0 + seconds))

    items = [done(9.0, 1.5), done(30.0, 4.25), done(12.0, 2.0)]
    assert "load 4.2" in items[1].line()
    (stats,) = recovery.per_kind(items)
    assert stats.load_p50 == pytest.approx(2.0)
    assert stats.line().endswith("load p50 2.0")


def test_records_per_second_runs_from_the_first_commit_to_the_last() -> None:
    commits = [recovery.Commit(i, 1, 100.0 + i, 50) for i in range(1, 12)]
    assert report.records_per_second(commits) == pytest.approx(50.0)
    assert report.records_per_second(commits[:1]) is None


# -- ledger -----------------------------------------------------------------------------


def test_the_ledger_knows_which_records_were_committed_and_which_aborted() -> None:
    book = ledger.Ledger()
    book.record(0, 50, ledger.Outcome.COMMITTED)
    book.record(50, 100, ledger.Outcome.ABORTED)
    book.record(100, 150, ledger.Outcome.UNKNOWN)
    book.record(150, 200, ledger.Outcome.UNKNOWN)
    assert book.resolve([*range(0, 50), 120]) == 2
    assert book.count(ledger.Outcome.COMMITTED) == 100
    assert set(book.seqs(ledger.Outcome.ABORTED)) == set(range(50, 100)) | set(range(150, 200))
    expect = ledger.expectation(book, EventFactory(seed=1, bad_every=20))
    assert len(expect.valid) + len(expect.rejected) == 100
    assert {19, 119} <= expect.rejected.keys()
    assert 69 not in expect.rejected
    assert expect.aborted == frozenset(range(50, 100)) | frozenset(range(150, 200))


def test_reject_reasons_are_the_ones_the_example_transform_gives() -> None:
    factory = EventFactory(seed=9, bad_every=20)
    bad = [seq for seq in range(2_000) if factory.is_bad(seq)]
    assert len(bad) == 100
    for seq in bad:
        assert ledger.reject_reason(factory, seq) == expected.reject_reason(factory.record(seq)[1])


# -- checks -----------------------------------------------------------------------------


def batch(batch_id: int, **ranges: tuple[int, int]) -> checks.Batch:
    return checks.Batch(batch_id, 1, {int(p.removeprefix("p")): r for p, r in ranges.items()})


def test_a_chain_that_tiles_every_partition_passes() -> None:
    history = [
        batch(1, p0=(0, 10), p1=(0, 4)),
        batch(2, p0=(10, 12), p1=(4, 4)),
        batch(3, p1=(4, 9)),
    ]
    found = checks.chain(history, {0: 0, 1: 0}, {0: 12, 1: 9})
    assert found == checks.Chain(
        batches=3, gaps=0, overlaps=0, missing_ids=0, ends_off_checkpoint=0
    )


def test_the_chain_counts_gaps_overlaps_and_missing_batch_ids() -> None:
    history = [batch(1, p0=(0, 10)), batch(2, p0=(8, 15)), batch(4, p0=(20, 25))]
    found = checks.chain(history, {0: 0}, {0: 30})
    assert found.overlaps == 2  # offsets 8 and 9 in batches 1 and 2
    assert found.gaps == 5 + 5  # 15..20 between batches, 25..30 before the checkpoint
    assert found.missing_ids == 1  # batch 3
    assert found.ends_off_checkpoint == 1


def test_a_chain_not_starting_at_the_start_has_a_gap() -> None:
    found = checks.chain([batch(1, p0=(3, 9))], {0: 0, 1: 0}, {0: 9})
    assert (found.gaps, found.overlaps, found.ends_off_checkpoint) == (3, 0, 0)


def expectation() -> ledger.Expectation:
    return ledger.Expectation(
        valid=frozenset({1, 2, 3, 4}),
        rejected={5: "malformed JSON", 6: "missing field page"},
        aborted=frozenset({7, 8}),
    )


def test_the_sink_check_counts_missing_repeated_aborted_and_unexpected_rows() -> None:
    found = checks.sink(expectation(), [1, 2, 2, 3, 7, 5])
    assert found == checks.SinkCheck(rows=6, missing=1, repeated=1, aborted=1, unexpected=1)
    assert checks.sink(expectation(), [1, 2, 3, 4]) == checks.SinkCheck(4, 0, 0, 0, 0)


def test_the_dead_letter_check_wants_every_malformed_record_with_its_reason() -> None:
    letters = [
        checks.DeadLetter(5, "malformed JSON"),
        checks.DeadLetter(5, "malformed JSON"),
        checks.DeadLetter(6, "malformed JSON"),
        checks.DeadLetter(8, "malformed JSON"),
        checks.DeadLetter(2, "missing field page"),
    ]
    found = checks.dead_letters(expectation(), letters)
    assert found == checks.DeadLetterCheck(
        letters=5, missing=0, wrong_reason=1, aborted=1, unexpected=1, repeats=1
    )
    assert checks.dead_letters(expectation(), []).missing == 2


def test_offsets_off_the_last_stable_offsets_are_named_by_partition() -> None:
    assert checks.offsets_off({0: 5, 1: 7}, {0: 5, 1: 7}) == {}
    assert checks.offsets_off({0: 5, 1: 9}, {0: 5, 1: 7, 2: 1}) == {
        1: "checkpoint 9 != last stable 7",
        2: "checkpoint None != last stable 1",
    }


def test_the_drain_reads_the_last_stable_offsets_again_until_the_checkpoint_holds_them() -> None:
    # A CI soak: a transaction left open by the Kafka restart was aborted by the broker
    # after production ended, the last stable offset moved past its marker (1178 ->
    # 1188) and the driver's next batch went from below 1178 to 1188; a drain that read
    # the offsets once waited 600 s for 1178 and reported the partition off.
    reads = iter([{0: 1178}, {0: 1178}, {0: 1188}])
    last = {0: 1178}

    def stable() -> dict[int, int]:
        last.update(next(reads, last))
        return dict(last)

    checkpoint = iter([{0: 1170}, {0: 1170}, {0: 1188}])
    held: dict[int, int] = {}

    def committed() -> dict[int, int]:
        held.update(next(checkpoint, held))
        return dict(held)

    assert run.drained(stable, committed, timeout=30, poll=0.01) == ({0: 1188}, True)


def test_the_drain_gives_up_at_its_deadline_with_the_offsets_last_read() -> None:
    assert run.drained(lambda: {0: 5}, lambda: None, timeout=0.05, poll=0.01) == ({0: 5}, False)


# -- summary ----------------------------------------------------------------------------


def summary(sink: checks.SinkCheck) -> report.Summary:
    return report.Summary(
        production=report.Production(100, 90, 10, 4),
        chain=checks.Chain(5, 0, 0, 0, 0),
        sink=sink,
        dead_letters=checks.DeadLetterCheck(4, 0, 0, 0, 0, 0),
        offsets_off={},
        recoveries=[
            recovery.Recovery(
                fault(FaultKind.KAFKA_RESTART, 100.0, 110.0), recovery.Commit(3, 1, 115.0, 20)
            )
        ],
        records_per_second=random.Random(1).uniform(10, 20),
    )


def test_the_summary_prints_the_counters_a_user_checks_and_passes_only_at_zero() -> None:
    good = summary(checks.SinkCheck(86, 0, 0, 0, 0))
    lines = good.lines()
    for counter in ("missing: 0", "duplicates: 0", "aborted in sink: 0", "dlq missing: 0"):
        assert counter in lines
    assert good.passed
    assert lines[-1] == "soak: PASSED"
    bad = summary(checks.SinkCheck(96, 0, 0, aborted=10, unexpected=0))
    assert "aborted in sink: 10" in bad.lines()
    assert not bad.passed
    assert bad.lines()[-1] == "soak: FAILED"
    assert lines[0] == "mode: no standby, clean-stop upgrades"


def test_two_soaks_are_compared_per_fault_kind_one_column_per_mode() -> None:
    def soak(standby: int, *found: tuple[FaultKind, float | None]) -> report.Summary:
        recoveries = [
            recovery.Recovery(
                replace(fault(kind, 100.0, 100.0), load=2.0),
                None if seconds is None else recovery.Commit(1, 2, 100.0 + seconds),
            )
            for kind, seconds in found
        ]
        return replace(
            summary(checks.SinkCheck(86, 0, 0, 0, 0)), recoveries=recoveries, standby=standby
        )

    cold = soak(0, (FaultKind.DRIVER_KILL, 17.4), (FaultKind.NODE_PARTITION, 35.0))
    hot = soak(1, (FaultKind.DRIVER_KILL, 5.7), (FaultKind.NODE_PARTITION, None))
    assert hot.lines()[0] == "mode: standby 1, warm-handover upgrades"
    head, kill, partition = (" ".join(line.split()) for line in report.compare([cold, hot]))
    assert head == "fault -> next commit standby 0: p50 / max (load) standby 1: p50 / max (load)"
    assert kill == "driver-kill 17.4 s / 17.4 s (2.0) 5.7 s / 5.7 s (2.0)"
    assert partition == "node-partition 35.0 s / 35.0 s (2.0) not recovered (1)"


# -- manifest ---------------------------------------------------------------------------


def test_the_soak_pipeline_is_a_valid_spec_of_the_events_example() -> None:
    target = Target("ns", "soak", "127.0.0.1:1", "t", "t-dlq", "127.0.0.1:2", "ks")
    body = manifest(target, "sluice-soak/job:v2")
    spec = PipelineSpec.model_validate(body["spec"])
    assert body["metadata"] == {"name": "soak", "namespace": "ns"}
    assert spec.image == "sluice-soak/job:v2"
    assert spec.transform.entrypoint == "sluice_job.examples.events:transform"
    assert spec.dead_letter is not None
    assert spec.dead_letter.kafka.topic == "t-dlq"
    assert target.checkpoint_key("c1") == "c1/ns/soak"
    assert (spec.standby, spec.upgrade.mode) == (0, UpgradeMode.CLEAN_STOP)


def test_the_soak_with_a_standby_upgrades_by_warm_handover() -> None:
    target = Target("ns", "soak", "127.0.0.1:1", "t", "t-dlq", "127.0.0.1:2", "ks")
    spec = PipelineSpec.model_validate(manifest(target, "sluice-soak/job:v1", standby=1)["spec"])
    assert (spec.standby, spec.upgrade.mode) == (1, UpgradeMode.WARM_HANDOVER)


def test_the_low_latency_soak_runs_the_mode_and_the_default_soak_a_1_s_trigger() -> None:
    target = Target("ns", "soak", "127.0.0.1:1", "t", "t-dlq", "127.0.0.1:2", "ks")
    low = PipelineSpec.model_validate(
        manifest(target, "sluice-soak/job:v1", low_latency=True)["spec"]
    )
    default = PipelineSpec.model_validate(manifest(target, "sluice-soak/job:v1")["spec"])
    assert (low.trigger.low_latency, low.trigger.interval_seconds) == (True, 0)
    assert (default.trigger.low_latency, default.trigger.interval_seconds) == (False, 1)


def test_a_deleted_pipelines_leftovers_are_found_and_nothing_of_a_live_one() -> None:
    """The full soak's second mode timed out waiting for its first commit: the first
    mode's pipeline, deleted after three kube-apiserver restarts, left its
    ServiceAccount behind (garbage collection missed it), and the operator refused to
    adopt it for the new pipeline of the same name. The soak now finds such leftovers
    (owned by a StreamingPipeline that no longer exists) and deletes them."""
    from sluice_dev.soak.cluster import orphans

    def owned(kind: str, name: str, owner_kind: str, uid: str) -> dict[str, Any]:
        refs = [{"kind": owner_kind, "uid": uid, "name": "soak"}]
        return {"kind": kind, "metadata": {"name": name, "ownerReferences": refs}}

    items = [
        owned("ServiceAccount", "soak-driver", "StreamingPipeline", "gone"),
        owned("Service", "soak-driver", "StreamingPipeline", "alive"),
        owned("Pod", "soak-driver-3", "StreamingPipeline", "gone"),
        owned("Secret", "other", "Deployment", "gone"),
        {"kind": "ServiceAccount", "metadata": {"name": "default"}},
    ]
    assert orphans(items, {"alive"}) == [
        ("serviceaccount", "soak-driver"),
        ("pod", "soak-driver-3"),
    ]
