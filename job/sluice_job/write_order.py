"""Which write wins: the order of writes derived from the batch sequence.

Batches are write-ahead planned (see ``checkpoint``), so batch ``n`` always covers
the same offset ranges and later batches cover later offsets. A write made for
batch ``n`` by a driver of epoch ``e`` carries the version ``n * EPOCHS + e``:

* a write for a later batch (later source offsets) always wins, whoever wrote first;
* two drivers executing the same batch (a restart, or a zombie fenced later) are
  ordered by epoch, so the newest driver's output stands.

Cassandra takes this version as the cell write timestamp (``USING TIMESTAMP``), the
Datastore sink stores it in the entity and refuses to replace a newer one. Note the
consequence for Cassandra: these timestamps are far below wall-clock microseconds,
so a manual write or delete with a default timestamp on the same cell shadows the
pipeline's later writes to that cell.
"""

from typing import Final

EPOCHS: Final = 1_000_000


def write_version(batch_id: int, epoch: int) -> int:
    if not 0 < epoch < EPOCHS:
        raise ValueError(f"epoch {epoch} outside 1..{EPOCHS - 1}")
    if batch_id < 0:
        raise ValueError(f"batch id {batch_id} is negative")
    return batch_id * EPOCHS + epoch
