"""The pipeline lifecycle as one table: every phase against every observation.

Each row is what ``next_phase`` must return from each phase (columns in the order of
``PHASES``) after one kind of observation; ``decide`` takes every phase it writes
from this function.
"""

from __future__ import annotations

import pytest

from sluice_operator.lifecycle import Seen, next_phase
from sluice_operator.model import Phase

pytestmark = pytest.mark.unit

PHASES = (
    Phase.PENDING,
    Phase.STARTING,
    Phase.RUNNING,
    Phase.UPGRADING,
    Phase.STOPPING,
    Phase.SUSPENDED,
    Phase.RECOVERING,
    Phase.FAILED,
)
P, S, R, U, T, X, V, F = PHASES  # Pending Starting Running Upgrading sTopping
#                                  suspended(X) recoVering Failed

TABLE: dict[Seen, tuple[Phase, ...]] = {
    #                           P  S  R  U  T  X  V  F
    Seen.INVALID_SPEC:         (F, F, F, F, F, F, F, F),
    Seen.STOP_ASKED:           (T, T, T, T, T, T, T, T),
    Seen.STOPPED:              (X, X, X, X, X, X, X, X),
    Seen.UNCHANGED_SINCE_FAILURE: (P, S, R, U, T, X, V, F),
    Seen.BACKING_OFF:          (P, S, R, U, T, X, V, F),
    Seen.NEVER_STARTED:        (S, S, S, S, S, S, S, S),
    Seen.DRIVER_GONE:          (V, V, V, U, V, V, V, V),
    Seen.STOPPED_FOR_UPGRADE:  (U, U, U, U, U, U, U, U),
    Seen.EXITED_CLEAN:         (V, V, V, V, V, V, V, V),
    Seen.EXITED_INVALID:       (F, F, F, F, F, F, F, F),
    Seen.EXITED_FENCED:        (V, V, V, V, V, V, V, V),
    Seen.EXITED_FAILED:        (V, V, V, V, V, V, V, V),
    Seen.GAVE_UP:              (F, F, F, F, F, F, F, F),
    Seen.ROLLED_BACK:          (V, V, V, V, V, V, V, V),
    Seen.NODE_LOST:            (V, V, V, V, V, V, V, V),
    Seen.UPGRADE_STOPPING:     (U, U, U, U, U, U, U, U),
    Seen.DRIVER_STOPPING:      (P, S, R, U, T, X, V, F),
    Seen.SPEC_CHANGED:         (U, U, U, U, U, U, U, U),
    Seen.DRIVER_PENDING:       (S, S, S, U, S, S, V, S),
    Seen.DRIVER_RUNNING:       (R, R, R, R, R, R, R, R),
}  # fmt: skip


def test_the_table_covers_every_phase_and_every_observation() -> None:
    assert set(TABLE) == set(Seen)
    assert set(PHASES) == set(Phase)
    assert all(len(row) == len(PHASES) for row in TABLE.values())


@pytest.mark.parametrize(
    ("seen", "phase", "expected"),
    [(seen, phase, row[i]) for seen, row in TABLE.items() for i, phase in enumerate(PHASES)],
)
def test_next_phase(seen: Seen, phase: Phase, expected: Phase) -> None:
    assert next_phase(phase, seen) is expected
