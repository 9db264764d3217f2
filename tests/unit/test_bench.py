"""The benchmark's pure parts: percentiles, batch reports, results and table, flags.

No timing is asserted anywhere: the figures of a run are reported, never tested."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench import baseline_writer, markdown, report, summary
from bench.batches import from_sluice, from_structured
from bench.ceiling import row_values, shares
from bench.contenders import DRIVERS, System, Target, pipeline_spec
from bench.pacing import Pacing, pacing, round_down, sustainable_rate
from bench.processes import JsonLines
from bench.run import SUSTAINABLE, TARGET, latency_rates
from bench.settings import Settings, from_args
from bench.stats import Span, Summary, percentile, window
from sluice_api.spec import PipelineSpec
from sluice_dev.events import EventFactory, normalised_page
from tests.support.bench_outcomes import batch, outcome

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
    low = PipelineSpec.model_validate(pipeline_spec(target, System.LOW_LATENCY))
    assert (low.trigger.low_latency, low.trigger.interval_seconds) == (True, 0)
    assert (low.source, low.sink) == (spec.source, spec.sink), "the same topic and table"
    assert spec.dead_letter is None, "by default a reject would fail the batch"
    lettered = dataclasses.replace(target, dead_letter_topic="topic-dlq")
    for system in DRIVERS:
        found = PipelineSpec.model_validate(pipeline_spec(lettered, system)).kafka_dead_letter
        assert found is not None
        assert found.topic == "topic-dlq"
    assert "deadLetter" not in pipeline_spec(lettered, System.STRUCTURED), "Sluice's only"


def _doc(*, sluice_rate: float = 500.0, structured_lag: int = 0) -> dict[str, Any]:
    settings = Settings(events=1000, label="smoke")
    found = outcome(sluice_rate=sluice_rate, structured_lag=structured_lag)
    return report.build(settings, found, datetime.now(UTC), (1.0, 1.0, 1.0))


def test_results_hold_every_figure_and_the_table_shows_them() -> None:
    doc = _doc()
    json.dumps(doc)  # plain JSON values only
    sluice, structured = doc["systems"]["sluice"], doc["systems"]["structured"]
    assert sluice["throughput"]["records_per_second"] == 500.0
    assert structured["throughput"]["records_per_second"] == 250.0
    assert doc["comparison"]["throughput"] == 2.0
    assert doc["ceiling"]["records_per_second"] == 1000.0
    assert doc["ceiling"]["verified"] is True
    assert doc["fraction_of_ceiling"] == {"sluice": 0.5, "structured": 0.25}
    assert sluice["checkpoint"]["commit"]["p99_ms"] == pytest.approx(4.0)
    assert structured["checkpoint"]["commit"]["p99_ms"] == pytest.approx(15.0)
    assert structured["checkpoint"]["total"]["p50_ms"] == pytest.approx(35.0)
    assert sluice["latency"][TARGET]["p50_ms"] == pytest.approx(1200.0)
    assert sluice["latency"][SUSTAINABLE]["rate"] == 170.0
    assert structured["latency"][TARGET]["poll_period_ms"] == 100.0
    assert "user-written" in structured["writer"]
    assert "CassandraSink" in sluice["writer"]
    assert doc["samples"]["sluice"]["latency_ms"][TARGET] == [1000.0, 1200.0, 1400.0]
    table = markdown.markdown(doc)
    assert "SMOKE RUN" in table
    assert "| throughput, backlog (records/s) | 500 | 250 | 2.00 |" in table
    assert "| share of the ceiling (1,000 rows/s) | 50 % | 25 % |  |" in table
    assert "| Cassandra writer | its CassandraSink | user-written: 1 INSERT per row" in table
    assert (
        "latency p50 / p95 / p99 at 170 events/s, sustainable (ms) | 1,000 / 1,090 / 1,098 |"
        in table
    )


def test_a_run_is_called_reduced_by_its_parameters_not_by_its_label() -> None:
    found = outcome()
    stamp = datetime.now(UTC)
    labelled_full = report.build(Settings(label="nice10"), found, stamp, (1.0, 1.0, 1.0))
    full_but_few = report.build(Settings(runs=1, order=(System.SLUICE,)), found, stamp, (1.0,) * 3)
    small = report.build(Settings(events=1000), found, stamp, (1.0, 1.0, 1.0))
    assert "reduced parameters" not in markdown.markdown(labelled_full)
    assert "reduced parameters" not in markdown.markdown(full_but_few)
    warning = next(line for line in markdown.markdown(small).splitlines() if "reduced" in line)
    assert "events 1,000 (full run: 1,000,000)" in warning


def test_a_phase_a_contender_fell_behind_shows_no_latency_and_no_ratio() -> None:
    doc = _doc(structured_lag=40_000)
    structured = doc["systems"]["structured"]["latency"][TARGET]
    assert structured["sustained"] is False
    assert structured["p99_ms"] == pytest.approx(1698.0)  # kept in the JSON, flagged
    assert structured["pacing"]["lag_seconds"] == 8.0
    assert doc["comparison"]["latency"][TARGET] == {"p50": None, "p99": None}
    assert doc["comparison"]["latency"][SUSTAINABLE]["p99"] is not None
    row = next(line for line in markdown.markdown(doc).splitlines() if "5,000 events/s" in line)
    assert "not sustained (8.0 s behind, 1 probes never seen)" in row
    assert "1,698" not in row


def test_targets_are_the_issues_and_reported_on_the_figures() -> None:
    met = _doc(sluice_rate=500.0)["targets"]
    assert met["throughput_ratio_min"] == 2.0
    assert met["throughput_met"] is True
    assert met["throughput_ceiling_met"] is False  # 50 % of the ceiling, 60 % wanted
    assert met["latency_p99_max_met"] is True
    assert met["latency_p99_vs_structured_met"] is True
    assert met["commit_p99_met"] is True
    assert met["checkpoint_p99_met"] is False  # 9 ms against 35 ms: more than 1/5
    slower = _doc(sluice_rate=400.0)["targets"]
    assert slower["throughput_met"] is False
    line = markdown.targets_line(_doc())
    assert "throughput >= 2 x SS: met (2.00)" in line
    assert ">= 60 % of the ceiling: MISSED (50 %)" in line
    assert "latency p99 at 5,000 events/s <= SS's: met and <= 3 s: met (1,396 ms)" in line


def test_a_baseline_that_fell_behind_loses_the_latency_comparison() -> None:
    targets = _doc(structured_lag=40_000)["targets"]
    assert targets["latency_p99_vs_structured_met"] is True


def test_the_sustainable_rate_is_a_round_share_of_the_slower_contender() -> None:
    assert round_down(2619.4) == 2600.0
    assert round_down(87.4) == 87.0
    assert round_down(12_345.0) == 12_000.0
    assert sustainable_rate([3742.0, 9000.0], 0.7, 5000.0) == 2600.0
    assert sustainable_rate([9000.0, 12_000.0], 0.7, 5000.0) is None  # target is sustainable
    assert sustainable_rate([3742.0, None], 0.7, 5000.0) is None
    settings = Settings(rate=5000.0, sustained_share=0.7)
    assert latency_rates(settings, outcome().throughput) == {SUSTAINABLE: 170.0, TARGET: 5000.0}


def test_a_contender_fell_behind_when_its_finished_batches_lag_the_producer() -> None:
    batches = [batch(t, 1000, {}) for t in range(10)]  # ends 1..10, 1,000 records each

    def judged(produced: int, missing: int = 0) -> Pacing:
        return pacing(
            batches,
            produced=produced,
            produce_ended=8.5,  # batches ending at 9 and 10 do not count
            rate=1000.0,
            trigger_seconds=1.0,
            behind_triggers=5.0,
            probes_missing=missing,
        )

    kept = judged(12_000)
    assert (kept.processed, kept.lag, kept.lag_seconds, kept.sustained) == (8000, 4000, 4.0, True)
    assert kept.why_not is None
    behind = judged(14_000)
    assert (behind.lag_seconds, behind.sustained) == (6.0, False)
    assert behind.why_not == "6.0 s behind"
    lost = judged(8000, missing=3)
    assert (lost.lag, lost.sustained, lost.why_not) == (0, False, "3 probes never seen")


def test_the_ceiling_splits_rows_evenly_and_writes_the_transforms_rows() -> None:
    assert [len(r) for r in shares(10, 3)] == [4, 3, 3]
    assert [r.start for r in shares(10, 3)] == [0, 4, 7]
    assert shares(1, 4) == [range(0, 1)]
    row = row_values(EventFactory(7), 11, "bench-x-backlog", 8)
    event = EventFactory(7).event(11)
    assert row[0] == event["event_id"]
    assert row[2] == normalised_page(str(event["page"]))  # as the transform cleans it
    assert row[5] == datetime.fromtimestamp(int(str(event["ts"])) / 1000, UTC)
    assert row[6:] == ("bench-x-backlog", 3, 1)


def test_the_ceiling_rate_is_all_rows_over_first_write_to_last_ack() -> None:
    run = outcome().ceiling
    assert run is not None
    assert (run.rows, run.seconds, run.records_per_second) == (1000, 1.0, 1000.0)


def test_the_baseline_writes_one_insert_per_row_with_the_batch_timestamp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[str, list[tuple[Any, ...]], int]] = []

    class FakeSession:
        def prepare(self, cql: str) -> str:
            return cql

    def execute(_session: object, statement: str, parameters: Any, concurrency: int) -> None:
        sent.append((statement, list(parameters), concurrency))

    monkeypatch.setattr(baseline_writer, "_session", FakeSession())
    monkeypatch.setattr(baseline_writer, "_statements", {})
    monkeypatch.setattr(baseline_writer, "execute_concurrent_with_args", execute)
    destination = baseline_writer.Destination(("127.0.0.1:19042",), "ks", "events")
    rows = [("e-1", 1), ("e-2", 2)]
    baseline_writer.write_partition(destination, ("event_id", "seq"), 1_763_780_400_000_001, rows)
    [(cql, parameters, concurrency)] = sent
    assert cql == "INSERT INTO ks.events (event_id, seq) VALUES (?, ?) USING TIMESTAMP ?"
    assert parameters == [("e-1", 1, 1_763_780_400_000_001), ("e-2", 2, 1_763_780_400_000_001)]
    assert concurrency == 64


def _run_doc(stamp: str, throughput: float, p99: float, sustained: bool) -> dict[str, Any]:
    """A run document with only what the summary reads."""
    latency = {
        "rate": 5000.0,
        "sustained": sustained,
        "n": 10,
        "p50_ms": p99 / 2,
        "p99_ms": p99,
        "probes_missing": 0,
        "pacing": {"lag_events": 0, "allowed_lag_events": 25_000, "lag_seconds": 0.5},
    }
    system = {
        "title": "x",
        "throughput": {"records_per_second": throughput},
        "checkpoint": {"commit": {"p99_ms": 5.0}, "total": {"p99_ms": 9.0}},
        "latency": {TARGET: latency},
    }
    other = {**system, "throughput": {"records_per_second": 1000.0}}
    base = _doc()
    return {
        **{k: base[k] for k in ("label", "machine", "parameters", "workload")},
        "stamp": stamp,
        "rates": {TARGET: 5000.0},
        "systems": {"sluice": system, "structured": other},
        "ceiling": {"records_per_second": 4000.0},
        "fraction_of_ceiling": {"sluice": throughput / 4000.0, "structured": 0.25},
        "comparison": {"throughput": throughput / 1000.0, "checkpoint_p99": 1.0, "latency": {}},
    }


def test_the_summary_holds_the_median_of_each_figure_and_every_run() -> None:
    docs = [
        _run_doc("r1", 2000.0, 900.0, True),
        _run_doc("r2", 3000.0, 5000.0, False),
        _run_doc("r3", 2400.0, 1100.0, True),
    ]
    found = summary.build(docs)
    json.dumps(found)
    assert found["runs"] == 3
    medians = found["summary"]
    assert medians["comparison"]["throughput"] == 2.4
    assert medians["ceiling"]["records_per_second"] == 4000.0
    assert medians["fraction_of_ceiling"]["sluice"] == 0.6
    assert found["median_run"] == "r3"
    latency = medians["systems"]["sluice"]["latency"][TARGET]
    assert (latency["sustained"], latency["sustained_runs"], latency["runs"]) == (True, 2, 3)
    assert latency["p99_ms"] == 1000.0  # the median of the two sustained runs only
    assert medians["targets"]["throughput_met"] is True
    assert [row["stamp"] for row in found["each_run"]] == ["r1", "r2", "r3"]
    text = summary.to_markdown(found)
    assert "median of 3 runs" in text
    assert "500 / 1,000 (sustained in 2 of 3 runs)" in text
    assert "| r2 | 3,000 | 1,000 | 3.00 | 4,000 | 75 % | 25 % |" in text
    assert "not sustained" in text


def test_median_of_takes_numbers_majorities_and_agreeing_values() -> None:
    assert summary.median_of([1.0, 3.0, 2.0]) == 2.0
    assert summary.median_of([1, 2]) == 1.5
    assert summary.median_of([True, False, True]) is True
    assert summary.median_of([True, False]) is False
    assert summary.median_of(["a", "a"]) == "a"
    assert summary.median_of(["a", "b"]) is None
    assert summary.median_of([None, 4.0]) == 4.0
    assert summary.median_of([{"x": 1.0, "y": None}, {"x": 3.0}]) == {"x": 2.0, "y": None}


def test_flags_override_smoke_defaults_which_override_full_ones() -> None:
    full = from_args([], env={})
    assert (full.events, full.runs, full.sustained_share) == (1_000_000, 3, 0.7)
    assert full.ceiling_plan().rows == 1_000_000
    smoke = from_args(["--smoke", "--latency-seconds", "12"], env={"BENCH_RATE": "2000"})
    assert (smoke.events, smoke.latency_seconds, smoke.rate, smoke.label, smoke.runs) == (
        100_000,
        12.0,
        2000.0,
        "smoke",
        1,
    )
    assert smoke.ceiling_plan().rows < smoke.events
    assert from_args([], env={"BENCH_RUNS": "5"}).runs == 5
    ordered = from_args(["--order", "sluice,structured", "--no-verify"], env={})
    assert ordered.order == (System.SLUICE, System.STRUCTURED)
    assert ordered.verify is False
    with pytest.raises(SystemExit):
        from_args(["--runs", "0"], env={})
