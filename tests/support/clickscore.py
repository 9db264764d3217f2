"""The custom-transform example (``examples/custom-transform``, package ``clickscore``)
as the e2e tests run it, on the node agent and on real nodes: its manifest pointed at
the test's stack, its sink table, and its documented rules restated in plain Python
(the rows the sink must hold, the dead letters' reasons)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import yaml

from sluice_dev.events import EventFactory, normalised_page
from sluice_dev.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "custom-transform"
BAD_REASONS = (
    "malformed JSON",
    "missing field page",
    "wrong type of ts: expected integer, got string",
)
"""The reasons of ``EventFactory``'s three kinds of bad record, in its order."""


def manifest() -> dict[str, Any]:
    """``pipeline.yaml`` as the example ships it."""
    return dict(yaml.safe_load((EXAMPLE / "pipeline.yaml").read_text()))


def weights() -> dict[str, int]:
    """The scores per action the example's manifest gives its transform."""
    return dict(manifest()["spec"]["transform"]["options"]["weights"])


def create_sink_table(cassandra: Any, keyspace: str) -> None:
    """The example's ``schema.cql`` table, in the test's keyspace."""
    statements = [s.strip() for s in (EXAMPLE / "schema.cql").read_text().split(";")]
    (table,) = [s for s in statements if "CREATE TABLE" in s]
    cassandra.execute(table[table.index("CREATE TABLE") :].replace("clicks.", f"{keyspace}."))


def localized(
    *,
    name: str,
    namespace: str,
    image: str,
    bootstrap: str,
    topic: str,
    dead_letters: str,
    contact: str,
    keyspace: str,
    executors: int,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The example manifest pointed at the local stack, the test's names and ``image``,
    with ``executors`` executor pods of that image (the user's code runs in them too),
    driver and executors on nodes of ``node_selector`` when given."""
    body = copy.deepcopy(manifest())
    body["metadata"] = {"name": name, "namespace": namespace}
    spec = body["spec"]
    spec["image"] = image
    spec["source"]["kafka"].update(bootstrapServers=bootstrap, topics=[topic])
    spec["sink"]["cassandra"].update(contactPoints=[contact], keyspace=keyspace)
    spec["checkpoint"]["cassandra"].update(contactPoints=[contact], keyspace=keyspace)
    spec["deadLetter"] = {"kafka": {"topic": dead_letters}}
    spec["trigger"] = {"intervalSeconds": 1}
    placement = {"nodeSelector": node_selector} if node_selector else {}
    spec["spark"] = {
        "driver": {"cores": 1, "memory": "768m", **placement},
        "executors": {"instances": executors, "cores": 1, "memory": "512m", **placement},
    }
    return body


def sink(cassandra: Any, keyspace: str) -> dict[str, tuple[Any, ...]]:
    """The example's sink table, by event id."""
    rows = cassandra.execute(
        f"SELECT event_id, user_id, page, action, score, event_time FROM {keyspace}.click_scores",
        timeout=60,
    )
    return {row.event_id: tuple(row) for row in rows}


def expected_row(
    factory: EventFactory, seq: int, weights: dict[str, int]
) -> tuple[str, str, str, str, int, datetime]:
    """The example's documented rules restated in plain Python."""
    event = factory.event(seq)
    action = str(event["action"]).lower()
    return (
        str(event["event_id"]),
        str(event["user_id"]),
        normalised_page(str(event["page"])),
        action,
        weights[action],
        datetime.fromtimestamp(int(str(event["ts"])) / 1000, UTC).replace(tzinfo=None),
    )


def expected_sink(
    factory: EventFactory, count: int, weights: dict[str, int]
) -> dict[str, tuple[Any, ...]]:
    """What the sink holds once the first ``count`` events are in: each good event's
    row, by its id."""
    rows = (expected_row(factory, seq, weights) for seq in range(count) if not factory.is_bad(seq))
    return {row[0]: row for row in rows}


def expected_letters(factory: EventFactory, count: int) -> list[tuple[bytes, str]]:
    """The dead letters of the first ``count`` events: (key, reason), sorted."""
    bad = (seq for seq in range(count) if factory.is_bad(seq))
    return sorted((f"k-{seq}".encode(), BAD_REASONS[(seq // 10) % 3]) for seq in bad)


def letters(messages: list[Any]) -> list[tuple[bytes, str]]:
    """Dead-letter messages as (key, reason), sorted, to compare with
    :func:`expected_letters`."""
    return sorted((m.key, m.headers["sluice.reason"]) for m in messages)
