"""The benchmark's pure parts: percentiles, batch reports, results and table, flags.

No timing is asserted anywhere: the figures of a run are reported, never tested."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import report
from bench.batches import BatchRecord, from_sluice, from_structured
from bench.contenders import System, Target, pipeline_spec
from bench.fixtures import Names
from bench.live import Produced
from bench.processes import JsonLines
from bench.run import LatencyRun, Outcome, ThroughputRun
from bench.settings import Settings, from_args
from bench.stats import Span, Summary, percentile, window
from sluice_api.spec import PipelineSpec

pytestmark = pytest.mark.unit


def test_percentile_interpolates_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 100.0
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_summary_is_in_milliseconds() -> None:
    summary = Summary.of_seconds([0.001, 0.002, 0.003])
    assert summary is not None
    assert (summary.n, summary.p50_ms, summary.max_ms) == (3, 2.0, 3.0)
    assert Summary.of_seconds([]) is None


def test_window_spans_busy_batches_and_can_skip_the_first() -> None:
    spans = [Span(10.0, 14.0, 400), Span(14.0, 15.0, 0), Span(15.0, 17.0, 400), Span(17, 19, 200)]
    whole = window(spans)
    assert whole is not None
    assert (whole.seconds, whole.records, whole.batches) == (9.0, 1000, 3)
    steady = window(spans, skip_first=True)
    assert steady is not None
    assert (steady.started, steady.records, steady.records_per_second) == (14.0, 600, 120.0)
    assert window(spans[:1], skip_first=True) is None
    assert window([]) is None


SLUICE_BATCH = {
    "ts": "2026-11-22T05:00:10.000+00:00",
    "event": "batch",
    "records": 5000,
    "read_s": 0.3,
    "transform_s": 0.2,
    "dead_letter_s": 0.0,
    "write_s": 0.4,
    "commit_s": 0.004,
    "batch_s": 0.914,
}


def test_sluice_batch_event_gives_span_commit_and_derived_plan() -> None:
    batch = from_sluice(SLUICE_BATCH)
    assert batch is not None
    assert batch.ended - batch.started == pytest.approx(0.914)
    assert batch.records == 5000
    assert batch.checkpoint["commit"] == pytest.approx(0.004)
    assert batch.checkpoint["plan"] == pytest.approx(0.01)
    assert batch.checkpoint_total == pytest.approx(0.014)
    assert from_sluice({"event": "claimed"}) is None


def test_sluice_batch_event_splits_the_commit_lwt_from_the_history_row() -> None:
    event = {**SLUICE_BATCH, "commit_s": 0.006, "commit_lwt_s": 0.002, "plan_s": 0.003}
    batch = from_sluice(event)
    assert batch is not None
    assert batch.checkpoint["commit"] == pytest.approx(0.002)
    assert batch.checkpoint["history"] == pytest.approx(0.004)
    assert batch.checkpoint["plan"] == pytest.approx(0.003)
    assert batch.checkpoint_total == pytest.approx(0.009)


def test_structured_progress_gives_checkpoint_log_writes_and_skips_idle_triggers() -> None:
    progress = {
        "timestamp": "2026-11-22T05:00:00.000Z",
        "numInputRows": 5000,
        "durationMs": {
            "latestOffset": 5,
            "walCommit": 12,
            "addBatch": 800,
            "commitOffsets": 9,
            "triggerExecution": 830,
        },
    }
    batch = from_structured(progress)
    assert batch is not None
    assert batch.ended - batch.started == pytest.approx(0.83)
    assert dict(batch.checkpoint) == {"walCommit": 0.012, "commitOffsets": 0.009}
    assert batch.phases["latestOffset"] == pytest.approx(0.005)
    idle = {"timestamp": "2026-11-22T05:00:01.000Z", "durationMs": {"latestOffset": 3}}
    assert from_structured(idle) is None


def test_json_lines_reads_only_complete_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    reader = JsonLines(path)
    assert reader.read_new() == []
    path.write_text('WARN something\n{"event": "a"}\n{"event": "b"')
    assert reader.read_new() == [{"event": "a"}]
    with path.open("a") as out:
        out.write(', "x": 1}\n')
    assert reader.read_new() == [{"event": "b", "x": 1}]


def test_both_contenders_get_a_valid_pipeline_spec() -> None:
    target = Target("k:1", "c:2", "ks", "topic", "table", 8, 25_000, 1.0, "2g")
    spec = PipelineSpec.model_validate(pipeline_spec(target))
    assert spec.source.kafka.max_records_per_partition == 25_000
    assert spec.transform.entrypoint == "sluice_job.examples.events:transform"
    assert spec.trigger.interval_seconds == 1.0


def _batch(start: float, records: int, checkpoint: dict[str, float]) -> BatchRecord:
    return BatchRecord(start, start + 1.0, records, checkpoint, {"batch": 1.0})


def outcome() -> Outcome:
    result = Outcome(Names("20261122T050000Z", "run"), Path("/tmp/logs"), backlog_seconds=3.0)
    sluice = {"commit": 0.004, "plan": 0.005}
    structured = {"walCommit": 0.02, "commitOffsets": 0.015}
    result.throughput = {
        System.SLUICE: ThroughputRun([_batch(t, 500, sluice) for t in (0, 1)], 30.0, 1000),
        System.STRUCTURED: ThroughputRun(
            [_batch(t, 250, structured) for t in (0, 1, 2, 3)], 35.0, 1000
        ),
    }
    result.latency = {
        System.SLUICE: LatencyRun([], [1.0, 1.2, 1.4], Produced(100, 3, 1.0), 0, 10, 0, 1.0),
        System.STRUCTURED: LatencyRun([], [1.5, 1.7], Produced(100, 3, 1.0), 1, 10, 0, 1.0),
    }
    return result


def test_results_hold_every_figure_and_the_table_shows_them() -> None:
    settings = Settings(events=1000, label="smoke")
    doc = report.build(settings, outcome(), datetime.now(UTC), (1.0, 1.0, 1.0))
    json.dumps(doc)  # plain JSON values only
    sluice, structured = doc["systems"]["sluice"], doc["systems"]["structured"]
    assert sluice["throughput"]["records_per_second"] == 500.0
    assert structured["throughput"]["records_per_second"] == 250.0
    assert doc["comparison"]["throughput"] == 2.0
    assert sluice["checkpoint"]["commit"]["p99_ms"] == pytest.approx(4.0)
    assert structured["checkpoint"]["commit"]["p99_ms"] == pytest.approx(15.0)
    assert structured["checkpoint"]["total"]["p50_ms"] == pytest.approx(35.0)
    assert sluice["latency"]["p50_ms"] == pytest.approx(1200.0)
    assert structured["latency"]["probes_missing"] == 1
    assert structured["latency"]["poll_period_ms"] == 100.0
    assert doc["targets"]["throughput_met"] is True
    assert doc["samples"]["sluice"]["latency_ms"] == [1000.0, 1200.0, 1400.0]
    table = report.markdown(doc)
    assert "SMOKE RUN" in table
    assert "| throughput, backlog (records/s) | 500 | 250 | 2.00 |" in table
    assert "(1 probes never seen)" in table


def test_flags_override_smoke_defaults_which_override_full_ones() -> None:
    assert from_args([], env={}).events == 1_000_000
    smoke = from_args(["--smoke", "--latency-seconds", "12"], env={"BENCH_RATE": "2000"})
    assert (smoke.events, smoke.latency_seconds, smoke.rate, smoke.label) == (
        100_000,
        12.0,
        2000.0,
        "smoke",
    )
    ordered = from_args(["--order", "sluice,structured", "--no-verify"], env={})
    assert ordered.order == (System.SLUICE, System.STRUCTURED)
    assert ordered.verify is False
