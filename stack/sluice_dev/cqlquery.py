"""``sluice-dev cql STATEMENT``: a statement run against the stack's Cassandra, its
rows printed as a table, so that a user can look at a sink table or a pipeline's
checkpoint without ``cqlsh`` (which Cassandra's Maven artifacts do not ship; the
stack's Python has the driver). :func:`table` is the pure part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

MAX_WIDTH: Final = 60
"""A value wider than this is cut, ending in ``…``."""


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """``rows`` under their ``columns``, each column as wide as its widest value, and a
    last line counting the rows (what ``cqlsh`` prints)."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [
        max([len(name), *(len(row[index]) for row in cells)]) for index, name in enumerate(columns)
    ]

    def line(values: Sequence[str]) -> str:
        return " | ".join(value.ljust(width) for value, width in zip(values, widths, strict=True))

    count = f"({len(rows)} row{'' if len(rows) == 1 else 's'})"
    if not columns:
        return [count]
    header = line(columns).rstrip()
    rule = "-+-".join("-" * width for width in widths)
    return [header, rule, *(line(row).rstrip() for row in cells), count]


def _cell(value: Any) -> str:
    text = "null" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_WIDTH else text[: MAX_WIDTH - 1] + "…"


def run(contact: str, statement: str, *, timeout: float = 30.0) -> list[str]:
    """Execute ``statement`` at ``contact`` (host:port); the printed table."""
    from cassandra.cluster import Cluster

    host, port = contact.rsplit(":", 1)
    cluster = Cluster([host], port=int(port))
    try:
        result = cluster.connect().execute(statement, timeout=timeout)
        columns = list(result.column_names or [])
        return table(columns, [tuple(row) for row in result])
    finally:
        cluster.shutdown()
