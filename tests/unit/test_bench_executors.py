"""The executor run of the benchmark, its pure parts: the pipelines the two modes run,
the driver's batch events read back, the exactness check, the figures and summary.

No timing is asserted: the run's figures are reported, never tested."""

from __future__ import annotations

from typing import Any

import pytest

from bench import executor_figures as ef
from bench.executors import SMOKE, Settings, parse
from sluice_api.spec import PipelineSpec
from sluice_operator import naming

pytestmark = pytest.mark.unit

WHERE = ef.Where("sluice-bench", "sluice-bench/job:v1", "k:1", "topic", "c:2", "ks", 2_500)


def test_both_modes_are_valid_pipelines_that_differ_only_in_where_tasks_run() -> None:
    local = ef.manifest(ef.LOCAL, WHERE)
    remote = ef.manifest(ef.executors_mode(2), WHERE)
    local_spec = PipelineSpec.model_validate(local["spec"])
    remote_spec = PipelineSpec.model_validate(remote["spec"])
    assert local_spec.spark.executors.instances == 0
    assert local_spec.spark.driver.cores == 2
    assert remote_spec.spark.executors.instances == 2
    # two task slots either way: local[2], or two one-core executors
    assert remote_spec.spark.driver.cores == 1
    assert remote_spec.spark.executors.cores == 1
    terms = remote["spec"]["spark"]["executors"]["affinity"]["podAntiAffinity"]
    [term] = terms["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname", "one executor per node"
    expressions = {e["key"]: e["values"] for e in term["labelSelector"]["matchExpressions"]}
    assert expressions[naming.LABEL_PIPELINE] == ["bench-executors"]
    for spec in (local_spec, remote_spec):
        assert spec.source.kafka.max_records_per_partition == 2_500
        assert spec.transform.entrypoint == ef.TRANSFORM
        assert spec.trigger.interval_seconds == 1.0
    assert local["spec"]["sink"]["cassandra"]["table"] == "events_local"
    assert remote["spec"]["sink"]["cassandra"]["table"] == "events_executors"
    assert local["metadata"]["name"] != remote["metadata"]["name"]


def _event(batch_id: int, records: int, ts: str, batch_s: float) -> dict[str, Any]:
    """A ``batch`` line as the driver logs it (``sluice_job.batch.log_fields``)."""
    return {
        "ts": ts,
        "event": "batch",
        "batch_id": batch_id,
        "epoch": 1,
        "records": records,
        "read_s": 0.1,
        "transform_s": 0.2,
        "write_s": 0.3,
        "commit_s": 0.05,
        "commit_lwt_s": 0.04,
        "plan_s": 0.02,
        "batch_s": batch_s,
    }


def test_a_batch_event_is_read_with_its_times_and_other_events_are_not() -> None:
    batch = ef.batch_of(_event(4, 800, "2026-11-27T00:00:10+00:00", 0.75))
    assert batch is not None
    assert (batch.batch_id, batch.records, batch.seconds) == (4, 800, 0.75)
    assert batch.started == pytest.approx(batch.ended - 0.75)
    assert batch.phases["write_s"] == 0.3
    assert ef.batch_of({"event": "claimed", "ts": "2026-11-27T00:00:00+00:00"}) is None


def _batch(batch_id: int, records: int, ended: float, seconds: float) -> ef.Batch:
    phases = dict.fromkeys(ef.PHASES, seconds / 10)
    return ef.Batch(batch_id, records, ended, seconds, phases)


def _result(
    *,
    rows: int = 1_500,
    paced_seconds: tuple[float, ...] = (0.4, 0.5, 0.6),
    ids: tuple[int, ...] = (3, 4, 5),
    mode: str = "local",
) -> ef.ModeResult:
    backlog = [_batch(0, 400, 110.0, 5.0), _batch(1, 400, 111.0, 1.0), _batch(2, 200, 112.0, 1.0)]
    paced = [
        _batch(i, 100 if n < 2 else 300, 120.0 + n, s)
        for n, (i, s) in enumerate(zip(ids, paced_seconds, strict=True))
    ]
    return ef.ModeResult(
        mode=mode,
        executors=0 if mode == "local" else 2,
        applied_at=80.0,
        backlog_events=1_000,
        paced_events=500,
        backlog=backlog,
        paced=paced,
        rows_in_sink=rows,
        executor_nodes=["b", "a"] if mode != "local" else [],
        pods="",
    )


def test_figures_of_an_exact_mode() -> None:
    found = ef.figures(_result())
    assert found.exact
    assert found.problems == []
    assert found.startup_seconds == pytest.approx(110.0 - 80.0)
    # the first batch (Python workers starting) is left out: 600 records in 2 s
    assert found.backlog_records_per_second == pytest.approx(600 / 2.0)
    assert found.paced_batches == 3
    assert found.paced_batch_median == pytest.approx(0.5)
    assert found.paced_phase_medians["write_s"] == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (_result(rows=1_499), "1,499 rows in the sink for 1,500 events"),
        (_result(ids=(3, 4, 4)), "a batch id committed twice"),
    ],
)
def test_a_mode_that_lost_or_repeated_something_is_not_exact(
    result: ef.ModeResult, problem: str
) -> None:
    found = ef.figures(result)
    assert not found.exact
    assert problem in found.problems


def test_records_counted_twice_are_not_exact() -> None:
    result = _result()
    doubled = ef.ModeResult(**{**result.__dict__, "paced": [*result.paced, result.paced[-1]]})
    assert "batches hold 1,800 records for 1,500 events" in ef.exactness(doubled)


def test_overhead_is_executors_minus_local_within_a_run_and_the_summary_takes_medians() -> None:
    runs = [
        ef.Comparison(
            ef.figures(_result(paced_seconds=(0.4, 0.5, 0.6))),
            ef.figures(_result(paced_seconds=(0.9, 1.0, 1.1), mode="executors")),
        ),
        ef.Comparison(
            ef.figures(_result(paced_seconds=(0.5, 0.6, 0.7))),
            ef.figures(_result(paced_seconds=(0.7, 0.8, 0.9), mode="executors")),
        ),
        ef.Comparison(
            ef.figures(_result(paced_seconds=(0.4, 0.4, 0.4))),
            ef.figures(_result(paced_seconds=(1.4, 1.4, 1.4), mode="executors", rows=1)),
        ),
    ]
    assert [run.overhead_seconds for run in runs] == pytest.approx([0.5, 0.2, 1.0])
    found = ef.summary(runs)
    assert found["runs"] == 3
    assert found["exact_runs"] == 2
    assert found["overhead_seconds"] == pytest.approx(0.5)
    assert found["modes"]["executors"]["paced_batch_median"] == pytest.approx(1.0)
    assert found["throughput_ratio"] == pytest.approx(1.0)
    text = ef.markdown(found, 2)
    assert "median of 3 runs (2 of them exact in both modes)" in text
    assert "executors - local): 0.500 s (median of the runs: 0.500 s, 0.200 s, 1.000 s)" in text
    assert "| paced batch, median | 0.500 s | 1.000 s |" in text


def test_smoke_and_flags() -> None:
    assert parse([]) == Settings()
    smoke = parse(["--smoke"])
    assert (smoke.events, smoke.paced_seconds, smoke.runs) == (
        SMOKE["events"],
        SMOKE["paced_seconds"],
        SMOKE["runs"],
    )
    assert parse(["--smoke", "--runs", "2", "--rate", "250"]).runs == 2
    assert parse(["--rate", "250"]).rate == 250.0
