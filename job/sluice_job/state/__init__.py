"""Keyed state a transform keeps between batches, as rows of a Cassandra table.

A transform that declares ``spec.transform.state`` is called with a third argument,
the batch's :class:`~sluice_job.state.handle.States`: ``state["totals"].lookup(keys)``
gives the state of the keys the batch touches, as the batches before it committed
it, and the transform returns the new state of those keys in
``TransformResult.state`` (a row with ``sluice_deleted`` true deletes a key's
state). The driver writes it with the batch, before the commit, under the
checkpoint's fence (docs/stateful.md).

``schema`` is the declaration as CQL and Spark types, ``table`` creates and checks
the table, ``access`` is the executor side (reads and writes per key), ``handle``
what the transform holds and ``write`` the driver's side of a batch's state write.
"""

from sluice_api.state import DELETED_COLUMN as DELETED
from sluice_job.state.handle import KeyedState, States, StateShapeError

__all__ = ["DELETED", "KeyedState", "StateShapeError", "States"]
