"""Write versions: which of two writes of the same key wins (write_order)."""

from __future__ import annotations

import pytest

from sluice_job.write_order import MAX_ORDER_MS, epoch_slot, next_version, write_version

pytestmark = pytest.mark.unit

PLANNED = 1_800_000_000_000  # a batch planned at 1_800_000_000 s, in ms


def test_a_later_batch_wins_over_any_epoch_of_an_earlier_one() -> None:
    later = next_version(PLANNED, 1_700_000_000.0)  # even with the clock behind
    assert write_version(later, 1) > write_version(PLANNED, 999)
    assert write_version(later, 1) > write_version(PLANNED, 5_000)


def test_the_newest_driver_of_the_same_batch_wins_and_a_rerun_ties() -> None:
    assert write_version(PLANNED, 3) > write_version(PLANNED, 2)
    assert write_version(PLANNED, 2) == write_version(PLANNED, 2)


def test_versions_are_the_plans_time_in_microseconds_within_a_millisecond() -> None:
    version = write_version(next_version(0, 1_800_000_000.25), 7)
    assert 0 <= version - 1_800_000_000_250_000 < 1_000


def test_versions_after_a_reset_beat_the_batch_id_versions_of_earlier_releases() -> None:
    """Before: batch n of epoch e wrote n * 1_000_000 + e, so a pipeline restarted
    from batch 1 wrote 1_000_001 under an old 9_000_002 and lost every cell. Even an
    old pipeline at batch 100 million (three years of one batch a second) is below."""
    assert write_version(next_version(0, 1_800_000_000.0), 1) > 100_000_000 * 1_000_000 + 999


@pytest.mark.parametrize(
    ("version", "epoch", "says"),
    [(-1, 1, "batch version -1 is negative"), (PLANNED, 0, "epoch 0 is not positive")],
)
def test_nonsense_is_refused(version: int, epoch: int, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        write_version(version, epoch)


def test_an_ordered_rows_version_keeps_the_writing_drivers_epoch() -> None:
    """``sinks.ordered`` makes a row's version from its own time and the epoch part
    of the batch's version: a newer driver wins at an equal time, never over a newer
    time."""
    batch = write_version(PLANNED, 7)
    assert epoch_slot(batch) == 7
    assert epoch_slot(write_version(PLANNED, 5_000)) == 999
    assert epoch_slot(0) == 0  # a dry run's
    event = 1_700_000_000_123
    assert write_version(event, epoch_slot(batch)) == event * 1000 + 7
    assert write_version(event + 1, 1) > write_version(event, 999)
    with pytest.raises(ValueError, match="negative"):
        epoch_slot(-1)


def test_the_largest_order_value_still_fits_a_cell_timestamp() -> None:
    assert write_version(MAX_ORDER_MS, 999) <= 2**63 - 1
    assert (MAX_ORDER_MS + 1) * 1000 + 999 > 2**63 - 1
