"""Which write wins: write versions that only grow, per pipeline and across pipelines.

Every batch gets a *version* when it is planned: the wall-clock millisecond of its
plan, raised to one past the version of the batch before it when the clock is behind
(another node's clock, a clock step). The version is written ahead with the batch's
ranges (see ``checkpoint``), so a batch id always means the same ranges *and* the
same version, whichever driver executes it. A write made for a batch by a driver of
epoch ``e`` carries ``version * EPOCH_SLOTS + min(e, EPOCH_SLOTS - 1)``, which is the
plan's time in microseconds give or take a millisecond:

* a write for a later batch always wins, whoever wrote first: its version is greater;
* two drivers executing the same batch (a restart, or a zombie fenced later) are
  ordered by epoch, so the newest driver's output stands;
* after the checkpoint is reset, or when a new pipeline writes a table an older one
  wrote, batch ids start again at 1 but versions do not: they follow the clock, so
  the new writes replace the old ones (when batch ids were the versions, the new
  writes lost to the old cells and the offsets committed anyway).

Cassandra takes the write version as the cell write timestamp (``USING TIMESTAMP``);
it is close to the wall clock in microseconds, which is what Cassandra's own clients
use, so a manual write and a pipeline's write are ordered by when they happened. The
Datastore sink stores the version in the entity and refuses to replace a newer one.

With ``spec.sink.orderColumn`` a row's version is the same sum with the row's own
time in place of the plan's: ``order_ms * EPOCH_SLOTS + min(e, EPOCH_SLOTS - 1)``
(``sinks.ordered``). The latest event of a key then wins whatever the order its
batch ran in, and two writes of one millisecond are still ordered by epoch, so a
replay by a newer driver (an upgrade that fixes a value) replaces what an older
driver wrote for the same events.
"""

from typing import Final

EPOCH_SLOTS: Final = 1_000
"""Write versions per batch version: one per epoch, epochs past 999 share the last."""


MAX_ORDER_MS: Final = (2**63 - EPOCH_SLOTS) // EPOCH_SLOTS
"""The largest order value (milliseconds) whose write version fits a signed 64-bit
cell timestamp."""


def next_version(previous: int, now_seconds: float) -> int:
    """The version of a batch planned at ``now_seconds`` (wall clock) after a batch
    of version ``previous`` (0 for none): milliseconds, strictly increasing."""
    return max(int(now_seconds * 1000), previous + 1)


def write_version(batch_version: int, epoch: int) -> int:
    """The version a driver of ``epoch`` writes a batch of ``batch_version`` with."""
    if epoch < 1:
        raise ValueError(f"epoch {epoch} is not positive")
    if batch_version < 0:
        raise ValueError(f"batch version {batch_version} is negative")
    return batch_version * EPOCH_SLOTS + min(epoch, EPOCH_SLOTS - 1)


def epoch_slot(version: int) -> int:
    """The epoch's part of a write version made by :func:`write_version` (0 for the
    version 0 a dry run writes with)."""
    if version < 0:
        raise ValueError(f"write version {version} is negative")
    return version % EPOCH_SLOTS
