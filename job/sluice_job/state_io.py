"""The cost of a batch's state requests, as the batch loop reports it (``PhaseTimes``)
and the workers count it (``state.tally``): plain numbers, no Spark."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StateIO:
    """Requests to the states' tables: reads (a lookup's per key, a write's read of
    the versions it replaces, the open-windows index) and writes (a key's new row and
    its older rows' deletion, the index's entries)."""

    read_seconds: float = 0.0
    keys_read: int = 0
    write_seconds: float = 0.0
    keys_written: int = 0

    def __add__(self, other: StateIO) -> StateIO:
        return StateIO(
            self.read_seconds + other.read_seconds,
            self.keys_read + other.keys_read,
            self.write_seconds + other.write_seconds,
            self.keys_written + other.keys_written,
        )

    def __sub__(self, other: StateIO) -> StateIO:
        return StateIO(
            self.read_seconds - other.read_seconds,
            self.keys_read - other.keys_read,
            self.write_seconds - other.write_seconds,
            self.keys_written - other.keys_written,
        )
