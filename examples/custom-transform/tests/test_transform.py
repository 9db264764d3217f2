"""The transform as the driver runs it, on a few sample records in a local Spark
session (``sluice_job.testing``): no Kafka, no Cassandra."""

from __future__ import annotations

from pathlib import Path

from sluice_job import testing

ENTRYPOINT = "clickscore.transform:transform"


def test_valid_events_become_scored_rows_and_the_others_rejects_with_their_reason() -> None:
    result = testing.run(
        ENTRYPOINT,
        [
            {
                "key": "k-0",
                "value": {
                    "event_id": "e-0",
                    "user_id": "u-1",
                    "page": "/Home/?ref=ad",
                    "action": "click",
                    "ts": 1_763_780_400_123,
                },
            },
            "{not json",
            {
                "key": "k-2",
                "value": {
                    "event_id": "e-2",
                    "page": "/cart",
                    "action": "scroll",
                    "ts": 1_763_780_401_000,
                },
            },
            {"value": {"event_id": "e-3", "action": "view", "ts": 1}},
        ],
        {"weights": {"scroll": 2}},
    )
    rows = sorted(result.output, key=lambda row: row["event_id"])
    assert [(r["event_id"], r["user_id"], r["page"], r["action"], r["score"]) for r in rows] == [
        ("e-0", "u-1", "/home", "click", 5),
        ("e-2", None, "/cart", "scroll", 2),
    ]
    assert rows[0]["event_time"].timestamp() == 1_763_780_400.123
    assert [(r["offset"], r["reason"]) for r in result.rejects] == [
        (1, "malformed JSON"),
        (3, "missing field page"),
    ]


def test_the_output_has_the_columns_of_the_table() -> None:
    result = testing.run(
        ENTRYPOINT, [{"value": {"event_id": "e", "page": "/", "action": "view", "ts": 0}}]
    )
    assert list(result.output[0]) == [
        "event_id",
        "user_id",
        "page",
        "action",
        "score",
        "event_time",
    ]


def test_the_output_fits_the_sink_table() -> None:
    """Its columns, primary key and types against schema.cql, the table's own statement."""
    testing.run(
        ENTRYPOINT,
        [{"value": {"event_id": "e", "page": "/", "action": "view", "ts": 0}}],
        sink_table=Path(__file__).parent.parent / "schema.cql",
    )
