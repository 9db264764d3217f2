"""``sluice-dev cql``'s table: what a user reads instead of cqlsh's output."""

from __future__ import annotations

import pytest

from sluice_dev import cqlquery

pytestmark = pytest.mark.unit


def test_rows_line_up_under_their_columns_and_are_counted() -> None:
    lines = cqlquery.table(["page", "events"], [("/checkout", 12), ("/", None)])
    assert lines == [
        "page      | events",
        "----------+-------",
        "/checkout | 12",
        "/         | null",
        "(2 rows)",
    ]


def test_a_long_value_is_cut_and_a_statement_without_rows_says_so() -> None:
    (_header, _rule, row, count) = cqlquery.table(["v"], [("x" * 200,)])
    assert len(row) == cqlquery.MAX_WIDTH
    assert row.endswith("…")
    assert count == "(1 row)"
    assert cqlquery.table([], []) == ["(0 rows)"]
