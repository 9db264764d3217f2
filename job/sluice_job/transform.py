"""Loading the user's transformation and the contract it follows.

``transform.entrypoint`` names ``module:function(records, options)``. The function
receives the batch's records (Kafka's columns ``key``, ``value``, ``topic``,
``partition``, ``offset``, ``timestamp``, ``timestampType``, ``headers``, plus
``batch_id`` and the source position ``_sluice_position``, see ``keys``) and the
``transform.options`` mapping, and returns either

* a ``DataFrame``: the rows for the sink; the transform rejects nothing, or
* a :class:`TransformResult` ``(output, rejects)``: the rows for the sink, and the
  records it refuses (malformed, incomplete), each as the original Kafka record
  (``key``, ``value``, ``topic``, ``partition``, ``offset``) plus a ``reason`` string
  saying what is wrong with it, e.g. ``missing field page``.

Rejects go to ``spec.deadLetter`` with the reason, before the batch commits (see
``deadletter``). A record that is neither in the output nor among the rejects is
filtered on purpose (say, an event type the pipeline ignores): nothing tracks it.
Both frames are lazy: the output is computed by the Spark job that writes the sink,
the rejects by a second job that counts and sends them (``execute``). Each job
evaluates the transform's plan over the same records, so the decision between output
and reject must be deterministic (docs/writing-a-transform.md): a record decided by
a random number could land in neither or in both. A transform that returns rejects
and whose frames Spark knows to be non-deterministic (``rand()``, ``uuid()``,
``shuffle()``, a UDF marked ``asNondeterministic()``) is refused before anything is
written (:class:`NondeterministicTransformError`, exit 2).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from pyspark.sql import DataFrame

REJECT_COLUMNS: Final = ("key", "value", "topic", "partition", "offset", "reason")
"""What a reject carries: the record as read from Kafka, and why it was refused."""


@dataclass(frozen=True)
class TransformResult:
    """What a transform returns when it rejects records; ``rejects`` has at least
    :data:`REJECT_COLUMNS` (further columns are ignored)."""

    output: DataFrame
    rejects: DataFrame | None = None

    def with_output(self, output: DataFrame) -> TransformResult:
        """The same rejects with another output, for transforms built on others."""
        return TransformResult(output, self.rejects)


TransformFn = Callable[[DataFrame, Mapping[str, Any]], DataFrame | TransformResult]


class EntrypointError(ValueError):
    """``transform.entrypoint`` does not name a callable; the message says why."""


class NondeterministicTransformError(ValueError):
    """The transform returns rejects, and its output or rejects are not deterministic."""


class RejectsShapeError(ValueError):
    """The transform's rejects lack a column of :data:`REJECT_COLUMNS`."""


def load(entrypoint: str) -> TransformFn:
    module_name, _, function_name = entrypoint.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise EntrypointError(
            f"spec.transform.entrypoint: cannot import module {module_name!r}: {err}"
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise EntrypointError(
            f"spec.transform.entrypoint: {module_name!r} has no function {function_name!r}"
        )
    return cast(TransformFn, function)


def apply(function: TransformFn, records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    """Call the user's function and bring its answer to one shape: the output, and
    the rejects reduced to :data:`REJECT_COLUMNS` (or ``None``)."""
    result = function(records, options)
    if isinstance(result, DataFrame):
        return TransformResult(result)
    if not isinstance(result, TransformResult):
        raise TypeError(
            f"the transform returned {type(result).__name__}: it must return a DataFrame "
            "or a sluice_job.transform.TransformResult"
        )
    if result.rejects is None:
        return result
    missing = [c for c in REJECT_COLUMNS if c not in result.rejects.columns]
    if missing:
        raise RejectsShapeError(
            f"the transform's rejects lack column(s) {missing}: a reject carries the "
            f"record's {', '.join(REJECT_COLUMNS[:-1])} and a reason"
        )
    for name, frame in (("output", result.output), ("rejects", result.rejects)):
        if not deterministic(frame):
            raise NondeterministicTransformError(
                f"spec.transform.entrypoint: the transform's {name} is not deterministic "
                "(rand(), uuid(), shuffle() or a UDF marked asNondeterministic()): its output "
                "and rejects are computed by separate Spark jobs, so a record decided that "
                "way could land in neither or in both. Decide by the record's content, or "
                "return one DataFrame without rejects (docs/writing-a-transform.md)"
            )
    return TransformResult(result.output, result.rejects.select(*REJECT_COLUMNS))


def deterministic(frame: DataFrame) -> bool:
    """Whether Spark's analysed plan of ``frame`` is deterministic: evaluated twice
    over the same input, it gives the same rows."""
    return bool(frame._jdf.queryExecution().analyzed().deterministic())
