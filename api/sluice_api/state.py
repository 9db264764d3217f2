"""Keyed state a transform keeps between batches: ``spec.transform.state``.

Sluice's checkpoints hold data, never code, and so does its state: each declared
state is a Cassandra table in the checkpoint's cluster, one row per key and batch
version, that the user reads with CQL. The driver and the operator agree on its
shape here: its name, its key and value columns with CQL types, its table and TTL.
The driver creates the table, checks it against the declaration and reads and writes
it (``sluice_job.state``); the API server refuses a malformed declaration through the
schema generated from this model.
"""

from __future__ import annotations

import re
from typing import Final, Self

from pydantic import Field, model_validator

from sluice_api.spec_base import CASSANDRA_MAX_TTL, CASSANDRA_NAME, ENTRYPOINT, Model

VERSION_COLUMN: Final = "sluice_version"
"""The clustering column of every state table: the batch version that wrote the row."""
DELETED_COLUMN: Final = "sluice_deleted"
"""True in a row that records the key's deletion (its state is gone from that batch on)."""
REVISION_COLUMN: Final = "sluice_revision"
"""The declaration's ``revision`` a row was written under (null: revision 1)."""
SESSIONS_COLUMN: Final = "sluice_sessions"
"""A session state's map of its key's open sessions: start to last event time."""
RESERVED: Final = (VERSION_COLUMN, DELETED_COLUMN, REVISION_COLUMN, SESSIONS_COLUMN)
"""Column names a declaration may not use: the driver's own columns of the table."""
STATES_MAX: Final = 8
KEY_COLUMNS_MAX: Final = 8
VALUE_COLUMNS_MAX: Final = 64
WINDOW_MAX_SECONDS: Final = 31 * 24 * 3600
CQL_TYPE: Final = r"^[a-z]+( *<[a-z ,<>]+>)?$"
"""A CQL type as a declaration writes it: ``bigint``, ``set<text>``, ``map<text, int>``;
which types the driver takes is checked when it starts (exit 2, naming the column)."""


class StateColumn(Model):
    """One column of a state table: its name and CQL type."""

    name: str = Field(pattern=CASSANDRA_NAME, max_length=48, description="Column name.")
    type: str = Field(
        pattern=CQL_TYPE,
        max_length=100,
        description=(
            "CQL type: a scalar (text, bigint, int, double, boolean, timestamp, uuid, "
            "blob, ...) or a collection of scalars (set<text>, list<bigint>, map<text, int>)."
        ),
    )


class StateWindow(Model):
    """The state is per key and event-time window (``sluice_job.windows``): which key
    column holds the window's start, and the windows' size and slide."""

    start: str = Field(
        pattern=CASSANDRA_NAME,
        max_length=48,
        description="The key column (of CQL type timestamp) that holds the window's start.",
    )
    size_seconds: int = Field(
        ge=1, le=WINDOW_MAX_SECONDS, description="How long a window is, in event time."
    )
    slide_seconds: int | None = Field(
        default=None,
        ge=1,
        le=WINDOW_MAX_SECONDS,
        description=(
            "How far apart windows start: sliding windows when below sizeSeconds (an "
            "event is in sizeSeconds / slideSeconds of them); default: sizeSeconds "
            "(tumbling windows)."
        ),
    )

    @model_validator(mode="after")
    def _slide_divides_size(self) -> Self:
        slide = self.slide_seconds or self.size_seconds
        if slide > self.size_seconds or self.size_seconds % slide:
            raise ValueError(
                f"window.slideSeconds {slide} must divide window.sizeSeconds {self.size_seconds}"
            )
        return self

    @property
    def slide(self) -> int:
        return self.slide_seconds or self.size_seconds


class StateSession(Model):
    """The state is per key and event-time session (``sluice_job.sessions``): a key's
    events less than ``gapSeconds`` apart are one session, closed and written once
    when the watermark passes its last event plus the gap."""

    gap_seconds: int = Field(
        ge=1,
        le=WINDOW_MAX_SECONDS,
        description=(
            "The inactivity gap: an event this long (or longer) after a session's last "
            "event starts another session."
        ),
    )


class State(Model):
    """A state the transform reads and writes per key (docs/stateful.md)."""

    name: str = Field(
        pattern=CASSANDRA_NAME,
        max_length=48,
        description="How the transform names this state (state[name]).",
    )
    table: str = Field(
        pattern=CASSANDRA_NAME,
        max_length=48,
        description=(
            "Table of the state in the checkpoint's keyspace (or keyspace): created by the "
            "driver if missing, one row per key and batch version. One pipeline's: the "
            "table's comment names its pipeline, and another pipeline's table is refused."
        ),
    )
    keyspace: str | None = Field(
        default=None,
        pattern=CASSANDRA_NAME,
        max_length=48,
        description=(
            "Keyspace of the table (in the checkpoint's cluster); default: the checkpoint's."
        ),
    )
    key: list[StateColumn] = Field(
        min_length=1,
        max_length=KEY_COLUMNS_MAX,
        description="The key columns, in order: the table's partition key.",
    )
    columns: list[StateColumn] = Field(
        default_factory=list,
        max_length=VALUE_COLUMNS_MAX,
        description=(
            "The value columns. None: the state records only that a key was seen "
            "(de-duplication). A column added by a later version arrives null in rows "
            "written before it."
        ),
    )
    ttl_seconds: int = Field(
        default=0,
        ge=0,
        le=CASSANDRA_MAX_TTL,
        description=(
            "A key's state expires this long after the batch that last wrote it; 0 "
            "(the default): never."
        ),
    )

    revision: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description=(
            "The meaning of the state's columns, raised by a version of the transform that "
            "changes it: rows an older revision wrote go through migrate when read. Adding "
            "a column needs no new revision (it reads null in older rows)."
        ),
    )
    migrate: str | None = Field(
        default=None,
        pattern=ENTRYPOINT,
        max_length=200,
        description=(
            "module:function(row, revision) -> row or None, applied when a lookup reads a "
            "row an older revision wrote: the row's columns as a dict and the revision it "
            "was written under; returns the row in this revision's meaning (None: no "
            "state). Required when revision > 1."
        ),
    )

    window: StateWindow | None = Field(
        default=None,
        description=(
            "A state per event-time window, closed and written once when the watermark "
            "passes its end (sluice_job.windows, docs/stateful.md); needs "
            "spec.transform.eventTime."
        ),
    )

    session: StateSession | None = Field(
        default=None,
        description=(
            "A state per key and event-time session, each closed and written once when "
            "the watermark passes its last event plus the gap (sluice_job.sessions, "
            "docs/stateful.md): the table holds each value column as a map from a "
            "session's start to its value. Needs spec.transform.eventTime; not with window."
        ),
    )

    @model_validator(mode="after")
    def _window_or_session(self) -> Self:
        if self.window is not None and self.session is not None:
            raise ValueError(f"state {self.name!r}: declare window or session, not both")
        return self

    @model_validator(mode="after")
    def _window_start_is_a_timestamp_key(self) -> Self:
        if self.window is None:
            return self
        types = {c.name.lower(): c.type.replace(" ", "") for c in self.key}
        start = self.window.start.lower()
        if types.get(start) != "timestamp":
            raise ValueError(
                f"state {self.name!r}: window.start {self.window.start!r} must be a key "
                "column of type timestamp"
            )
        return self

    @model_validator(mode="after")
    def _migrate_with_revision(self) -> Self:
        if self.revision > 1 and self.migrate is None:
            raise ValueError(
                f"state {self.name!r}: revision {self.revision} needs migrate, the function "
                "that reads the rows older revisions wrote"
            )
        return self

    @model_validator(mode="after")
    def _names_once(self) -> Self:
        names = [c.name.lower() for c in (*self.key, *self.columns)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"state {self.name!r}: each column is named once, not {twice}")
        reserved = sorted(set(names) & set(RESERVED))
        if reserved:
            raise ValueError(
                f"state {self.name!r}: column(s) {reserved} are the driver's own; name yours "
                "otherwise"
            )
        return self

    def column_types(self) -> dict[str, str]:
        """Every declared column (key first) and its CQL type, names as Cassandra
        stores them (lower case), types without spaces."""
        return {c.name.lower(): re.sub(r"\s+", "", c.type) for c in (*self.key, *self.columns)}


def states_once(states: list[State]) -> list[State]:
    """``states`` when each name and each table is declared once, else raises."""
    for what, values in (
        ("name", [s.name for s in states]),
        ("table", [f"{s.keyspace or ''}.{s.table}".lower() for s in states]),
    ):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ValueError(f"each transform.state {what} is declared once, not {twice}")
    return states
