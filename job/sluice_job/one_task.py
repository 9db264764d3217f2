"""A small batch in one Spark task: the lever of ``trigger.mode: LowLatency``.

Spread over the cores, a batch of a few thousand records pays a shuffle to keep one
row per key (``keys.last_per_key``) and a Python worker per task. In one task the
single partition is clustered by any key, so Spark ranks the keys with no
``Exchange``, and one worker writes: 800 records take 0.53 s instead of 1.02 s
(``bench.phases``, docs/tuning.md). Which batches run so is :func:`in_one_task`, a
pure decision.

The mode's promise holds only for a transform that adds no shuffle of its own (a
``repartition``, a join of the batch with another frame of rows), so the first
one-task batch's output plan is inspected (:func:`refuse_shuffles`) and such a
transform refused before anything is written, naming the shuffle. A ``groupBy`` or
an ``orderBy`` of the batch's own rows needs none in one task and is accepted, as is
a broadcast join.
"""

from __future__ import annotations

import re
from typing import Final

from pyspark.sql import DataFrame

SHUFFLE: Final = re.compile(
    r"\bExchange (hashpartitioning|rangepartitioning|RoundRobinPartitioning|SinglePartition)"
    r"[^\n]*"
)
"""A shuffle in Spark's physical plan (``ShuffleExchangeExec``); a broadcast is
``BroadcastExchange`` and does not match."""


class ShufflingTransformError(ValueError):
    """A transform whose plan shuffles, under ``trigger.mode: LowLatency``."""


def in_one_task(records: int, limit: int | None) -> bool:
    """Whether a batch of ``records`` runs in one task: in the low-latency mode
    (``limit`` set), when it holds at most ``limit`` records; a backlog's large
    batches are spread over the cores as in the default mode."""
    return limit is not None and 0 < records <= limit


def shuffle_in(frame: DataFrame) -> str | None:
    """The first shuffle of ``frame``'s physical plan, as Spark prints it, or ``None``."""
    plan = str(frame._jdf.queryExecution().executedPlan().toString())
    found = SHUFFLE.search(plan)
    return None if found is None else found.group(0).strip()


def refuse_shuffles(output: DataFrame) -> None:
    """Raise :class:`ShufflingTransformError` if the transform's ``output``, over a
    batch in one task, still shuffles."""
    shuffle = shuffle_in(output)
    if shuffle is not None:
        raise ShufflingTransformError(
            "spec.transform.entrypoint: trigger.mode LowLatency runs a small batch in one "
            "Spark task, and this transform's output shuffles it again "
            f"({shuffle[:160]}): a shuffle stage per batch is the latency the mode takes "
            "out. Drop the repartition or the join of two frames of rows, or use "
            'trigger.mode Default (docs/design.md, "Low-latency mode")'
        )
