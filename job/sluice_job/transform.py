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
A transform that declares state (``spec.transform.state``, docs/stateful.md) takes a
third argument, the batch's ``sluice_job.state.States``, and returns the new state
of the keys it touched in ``TransformResult.state`` (a frame per state name); those
frames are written by jobs of their own, so they must be deterministic too.

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

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from pyspark.sql import DataFrame

from sluice_job.state import States, StateShapeError

REJECT_COLUMNS: Final = ("key", "value", "topic", "partition", "offset", "reason")
"""What a reject carries: the record as read from Kafka, and why it was refused."""


@dataclass(frozen=True)
class TransformResult:
    """What a transform returns when it rejects records; ``rejects`` has at least
    :data:`REJECT_COLUMNS` (further columns are ignored)."""

    output: DataFrame
    rejects: DataFrame | None = None
    state: Mapping[str, DataFrame] = field(default_factory=dict)
    """The new state of the keys the batch touched, per declared state name: the key
    columns, value columns, and optionally ``sluice_deleted`` (true: the key's state
    is deleted). A state left out is not written this batch."""
    event_time: DataFrame | None = None
    """The batch's event times, which move the watermark (``spec.transform.eventTime``):
    ``sluice_job.event_time.split(...).times``."""

    def with_output(self, output: DataFrame) -> TransformResult:
        """The same rejects, state and event times with another output, for
        transforms built on others."""
        return dataclasses.replace(self, output=output)


TransformFn = Callable[..., DataFrame | TransformResult]
"""``(records, options)``, or ``(records, options, state)`` with declared state."""


class EntrypointError(ValueError):
    """``transform.entrypoint`` does not name a callable; the message says why."""


class NondeterministicTransformError(ValueError):
    """The transform returns rejects, and its output or rejects are not deterministic."""


class RejectsShapeError(ValueError):
    """The transform's rejects lack a column of :data:`REJECT_COLUMNS`."""


def load(entrypoint: str, *, stateful: bool = False) -> TransformFn:
    """The function ``entrypoint`` names; ``stateful``: it must take the batch's
    state as a third argument (raises :class:`EntrypointError` if it cannot)."""
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
    if stateful and not _takes_three(function):
        raise EntrypointError(
            f"spec.transform.entrypoint: {entrypoint} takes (records, options), but the "
            "pipeline declares spec.transform.state or eventTime: it must take (records, "
            "options, state)"
        )
    return cast(TransformFn, function)


def _takes_three(function: Callable[..., Any]) -> bool:
    try:
        inspect.signature(function).bind(None, None, None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): let the call decide
        return True
    return True


def apply(
    function: TransformFn,
    records: DataFrame,
    options: Mapping[str, Any],
    states: States | None = None,
) -> TransformResult:
    """Call the user's function and bring its answer to one shape: the output, the
    rejects reduced to :data:`REJECT_COLUMNS` (or ``None``) and, with ``states``, the
    new states conformed to their declarations."""
    result = function(records, options) if states is None else function(records, options, states)
    if isinstance(result, DataFrame):
        return TransformResult(result)
    if not isinstance(result, TransformResult):
        raise TypeError(
            f"the transform returned {type(result).__name__}: it must return a DataFrame "
            "or a sluice_job.transform.TransformResult"
        )
    if result.state:
        result = dataclasses.replace(result, state=_states(result.state, states))
    if result.event_time is not None and not deterministic(result.event_time):
        raise NondeterministicTransformError(
            "spec.transform.entrypoint: the transform's event times are not deterministic: "
            "they move the watermark in a Spark job of their own (docs/stateful.md)"
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
    return dataclasses.replace(result, rejects=result.rejects.select(*REJECT_COLUMNS))


def _states(given: Mapping[str, DataFrame], states: States | None) -> dict[str, DataFrame]:
    """The new states, each conformed to its declaration, refused if undeclared or
    not deterministic (its write is a Spark job of its own)."""
    declared = list(states.names) if states is not None else []
    undeclared = sorted(set(given) - set(declared))
    if undeclared or states is None:
        raise StateShapeError(
            f"the transform returned state {undeclared or sorted(given)} that "
            f"spec.transform.state does not declare (declared: {declared})"
        )
    conformed = {}
    for name, frame in given.items():
        if not deterministic(frame):
            raise NondeterministicTransformError(
                f"spec.transform.entrypoint: the transform's new state {name!r} is not "
                "deterministic (rand(), uuid(), shuffle() or a UDF marked "
                "asNondeterministic()): the output and the state are written by separate "
                "Spark jobs, so they would disagree (docs/stateful.md)"
            )
        conformed[name] = states[name].conform(frame)
    return conformed


def deterministic(frame: DataFrame) -> bool:
    """Whether Spark's analysed plan of ``frame`` is deterministic: evaluated twice
    over the same input, it gives the same rows."""
    return bool(frame._jdf.queryExecution().analyzed().deterministic())
