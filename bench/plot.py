"""The PNG: distributions (empirical CDFs) of end-to-end latency (per latency phase:
solid at the target rate, dashed at the sustainable one) and of the per-batch
checkpoint cost of both contenders, drawn from a run's results document. A phase a
contender did not sustain is drawn thin and labelled so: its samples are not a
latency. matplotlib runs headless (Agg); it is the benchmark's only extra
dependency."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import markdown
from bench.contenders import System
from bench.run import PHASES, TARGET

COLORS = {
    System.SLUICE: "tab:blue",
    System.STRUCTURED: "tab:orange",
    System.REALTIME: "tab:green",
    System.LOW_LATENCY: "tab:purple",
}
CHECKPOINT = {
    System.SLUICE: "plan + commit LWTs",
    System.LOW_LATENCY: "plan + commit LWTs",
    System.STRUCTURED: "walCommit + commitOffsets",
    System.REALTIME: "walCommit + commitOffsets",
}
COMMIT = {
    System.SLUICE: "commit LWT",
    System.LOW_LATENCY: "commit LWT",
    System.STRUCTURED: "commitOffsets",
    System.REALTIME: "commitOffsets",
}


def ecdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """Sorted values and the fraction of samples at or below each."""
    ordered = sorted(values)
    n = len(ordered)
    return ordered, [(i + 1) / n for i in range(n)]


def draw(doc: Mapping[str, Any], path: Path) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as err:
        raise RuntimeError(
            "the benchmark's plot needs matplotlib: install the 'bench' extra "
            "(uv pip install -e '.[bench]')"
        ) from err
    figure, (latency, checkpoint) = pyplot.subplots(1, 2, figsize=(12, 4.5))
    for system in System:
        found = doc["samples"].get(system.value)
        if found is None:
            continue
        color = COLORS[system]
        for phase in PHASES:
            values = found["latency_ms"].get(phase)
            if not values:
                continue
            figures = doc["systems"][system.value]["latency"][phase]
            label = f"{system.display}, {figures['rate']:,.0f}/s"
            kept = figures["sustained"]
            latency.step(
                *ecdf(values),
                where="post",
                color=color,
                linestyle="-" if phase == TARGET else "--",
                linewidth=1.5 if kept else 0.6,
                label=label if kept else f"{label}: NOT SUSTAINED",
            )
        if found["checkpoint_ms"]:
            checkpoint.step(
                *ecdf(found["checkpoint_ms"]),
                where="post",
                color=color,
                label=f"{system.display}: {CHECKPOINT[system]}",
            )
        if found["commit_ms"]:
            commit = f"{system.display}: {COMMIT[system]} only"
            checkpoint.step(
                *ecdf(found["commit_ms"]), where="post", color=color, linestyle="--", label=commit
            )
    p = doc["parameters"]
    latency.set(
        title=f"End-to-end latency ({p['trigger_seconds']:g} s trigger)",
        xlabel="produce to row visible in Cassandra (ms)",
        ylabel="fraction of probes",
    )
    checkpoint.set(
        title="Checkpoint cost per batch",
        xlabel="ms (log scale)",
        ylabel="fraction of batches",
        xscale="log",
    )
    for axes in (latency, checkpoint):
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best", fontsize="small")
    figure.suptitle(f"{markdown.versus(doc)} ({doc['label']} run, {doc['stamp']})")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return path
