"""The benchmark's third contender (Real-Time Mode) and its kill phase, pure parts:
what a kill did to a table's rows, the results document and table with three
contenders, and the files a restarted contender writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bench import kill, markdown, report
from bench.contenders import JOBS, System, Target, run_name
from bench.kill import KillCheck, KillRun, Row
from bench.pacing import pacing
from bench.run import SUSTAINABLE, TARGET, ThroughputRun, latency_rates
from bench.settings import Settings, from_args
from sluice_job.write_order import write_version
from tests.support.bench_outcomes import batch, latency, outcome

pytestmark = pytest.mark.unit


def _row(seq: int, epoch: int) -> Row:
    return Row(f"e-{seq}", seq, write_version(1_000 + seq, epoch))


def test_a_kill_check_counts_loss_rows_under_two_keys_and_rows_the_restart_wrote_again() -> None:
    before = ["e-0", "e-1", "e-2"]
    rows = [
        _row(0, 1),  # written before the kill, left alone
        _row(1, 2),  # written before the kill, written again by epoch 2
        _row(2, 2),
        _row(3, 2),  # written after the restart only
        Row("other-3", 3, write_version(5_000, 2)),  # the same event under a second key
    ]
    found = kill.check(range(5), before, rows)
    assert found == KillCheck(
        expected=5, rows=5, missing=1, duplicates=1, rewritten=2, written_before_restart=3
    )


def test_a_kill_that_lost_nothing_and_rewrote_nothing_reports_zeros() -> None:
    rows = [_row(seq, 1) for seq in range(3)] + [_row(3, 2)]
    found = kill.check(range(4), ["e-0", "e-1", "e-2"], rows)
    assert (found.missing, found.duplicates, found.rewritten) == (0, 0, 0)


def _killed(rewritten: int) -> KillRun:
    c = KillCheck(1000, 1000, 0, 0, rewritten, 400)
    return KillRun(c, 12.0, 24_000, 9.5, 21.0)


def test_three_contenders_each_get_a_column_with_their_kill_figures() -> None:
    found = outcome()
    found.throughput[System.REALTIME] = ThroughputRun(
        [batch(t, 200, {"walCommit": 0.01, "commitOffsets": 0.012}) for t in range(5)], 40.0, 1000
    )
    found.latency[TARGET][System.REALTIME] = latency([0.05, 0.07, 0.3], 5000.0, 0)
    found.kill = {System.SLUICE: _killed(0), System.REALTIME: _killed(380)}
    doc = report.build(Settings(events=1000, label="smoke"), found, datetime.now(UTC), (1.0,) * 3)
    json.dumps(doc)
    assert doc["systems"]["realtime"]["throughput"]["records_per_second"] == 200.0
    assert doc["systems"]["realtime"]["kill"]["rewritten"] == 380
    assert doc["systems"]["structured"]["kill"] is None
    assert doc["fraction_of_ceiling"]["realtime"] == 0.2
    text = markdown.markdown(doc)
    assert "Sluice vs Spark Structured Streaming and Real-Time Mode" in text
    assert "| metric | Sluice | Structured Streaming | Real-Time Mode | Sluice / SS |" in text
    assert "| throughput, backlog (records/s) | 500 | 250 | 200 | 2.00 |" in text
    assert (
        "| latency p50 / p95 / p99 at 5,000 events/s, target (ms) | 1,200 / 1,380 / 1,396 | "
        in text
    )
    # Real-Time Mode's p50 / p95 / p99; the ratio stays Sluice / SS
    assert "| 70 / 277 / 295 | - |" in text
    assert "rows re-written | 0 / 0 / 0 of 400 | - | 0 / 0 / 380 of 400 |" in text
    assert "ForeachWriter" in text


def test_without_real_time_mode_the_table_keeps_two_columns() -> None:
    doc = report.build(
        Settings(events=1000, label="smoke"), outcome(), datetime.now(UTC), (1.0,) * 3
    )
    assert "| metric | Sluice | Structured Streaming | Sluice / SS |" in markdown.markdown(doc)
    assert "realtime" not in doc["fraction_of_ceiling"]


def test_a_restarted_contender_writes_its_own_files_and_every_spark_query_has_a_job() -> None:
    assert run_name("kill", 1) == "kill"
    assert run_name("kill", 2) == "kill-epoch2"
    assert set(JOBS) == {System.STRUCTURED, System.REALTIME}
    assert Target("k:1", "c:2", "ks", "t", "tb", 8, 100, 1.0, "2g").checkpoint_seconds == 5.0


def test_the_kill_phase_must_kill_within_its_production() -> None:
    with pytest.raises(SystemExit):
        from_args(["--kill-seconds", "10", "--kill-after", "12"], {})
    assert from_args(["--kill-seconds", "0", "--kill-after", "12"], {}).kill_seconds == 0
    assert from_args([], {}).order == (
        System.STRUCTURED,
        System.REALTIME,
        System.SLUICE,
        System.LOW_LATENCY,
    )


def test_real_time_modes_open_batch_adds_one_batch_duration_to_the_allowance() -> None:
    ended = [batch(0.0, 5_000, {})]  # ends at 1.0; the open batch's rows are not counted
    phase = {"produced": 40_000, "produce_ended": 10.0, "rate": 5_000.0}
    judged = {"trigger_seconds": 1.0, "behind_triggers": 5.0, "probes_missing": 0}
    micro = pacing(ended, **phase, **judged)
    assert not micro.sustained  # 7 s behind, 5 s allowed
    real_time = pacing(ended, **phase, **judged, open_batch_seconds=5.0)
    assert real_time.sustained  # 7 s behind, 5 s + one 5 s batch allowed


def test_the_sustainable_rate_follows_the_micro_batch_contenders() -> None:
    found = outcome()  # Sluice 500 records/s, Structured Streaming 250
    found.throughput[System.REALTIME] = ThroughputRun([batch(0, 100, {})], 40.0, 100)
    settings = Settings(order=(System.STRUCTURED, System.REALTIME, System.SLUICE))
    assert latency_rates(settings, found.throughput)[SUSTAINABLE] == 170.0  # 0.7 x 250
    alone = {System.REALTIME: found.throughput[System.REALTIME]}
    assert latency_rates(Settings(order=(System.REALTIME,)), alone)[SUSTAINABLE] == 70.0
