"""When micro-batches start and how long one may take: ``spec.trigger``."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from pydantic import Field

from sluice_api.spec_base import Model


class TriggerMode(StrEnum):
    DEFAULT = "Default"
    """Batches every ``intervalSeconds``, each spread over the driver's cores."""
    LOW_LATENCY = "LowLatency"
    """The next batch as soon as the last commits, a small batch in one task, and a
    short idle poll: end-to-end latency under a second at a few thousand events/s
    (docs/design.md, "Low-latency mode")."""


LOW_LATENCY_ONE_TASK_RECORDS: Final = 20_000
"""In ``LowLatency`` mode, a batch of at most this many records runs in one Spark
task: one task ranks its keys with no shuffle and starts one Python worker, which
halves a small batch's write (docs/tuning.md). Larger batches (a backlog after a
restart) are spread over the cores as in the default mode."""


class Trigger(Model):
    interval_seconds: float = Field(
        default=5.0, ge=0.0, le=3600.0, description="Seconds between micro-batch starts."
    )
    mode: TriggerMode = Field(
        default=TriggerMode.DEFAULT,
        description=(
            "Default: a batch every intervalSeconds. LowLatency: the next batch as soon "
            "as the last one commits (needs intervalSeconds: 0 and a Kafka source), a "
            f"batch of up to {LOW_LATENCY_ONE_TASK_RECORDS:,} records in one Spark task "
            "and new data looked for "
            "every 0.1 s when idle; for end-to-end latency under a second. Every "
            "guarantee of Default holds. It refuses a transform whose plan shuffles "
            "(repartition, a join of two streams of rows): a shuffle stage is the "
            "latency the mode takes out (docs/design.md)."
        ),
    )
    batch_timeout_seconds: float = Field(
        default=600.0,
        ge=1.0,
        le=86400.0,
        description=(
            "Seconds one attempt of a batch (read, transform, write, commit) may take. A "
            "batch that does not finish in time (a Spark job or a sink that hangs) ends "
            "the driver with exit 1 and reason BatchTimeout, so the operator restarts it; "
            "nothing of the batch is committed. Time spent waiting out a dependency "
            "outage does not count: each attempt has its own deadline."
        ),
    )

    @property
    def low_latency(self) -> bool:
        return self.mode is TriggerMode.LOW_LATENCY
