"""The de-duplication example's tests (``sluice_job.examples.dedup``): its state in
versions 1 and 2 and the oracle that checks the KPI sums against the distinct events
and the state against the ids each version counted first (driver-level and on real
nodes). Its sink table is the KPI example's (``tests.support.kpis.TABLE``)."""

from __future__ import annotations

from typing import Any

from sluice_dev.events import EventFactory
from tests.support import kpis

WINDOW_S = 10
"""The KPI window (the transform's ``windowSeconds`` option)."""
SEEN_V1: dict[str, Any] = {
    "name": "seen",
    "table": "seen_events",
    "key": [{"name": "event_id", "type": "text"}],
    "ttlSeconds": 86_400,
}
SEEN_V2 = {**SEEN_V1, "columns": [{"name": "first_batch", "type": "bigint"}]}


def assert_dedup_exact(
    cassandra: Any,
    keyspace: str,
    bootstrap: str,
    topics: tuple[str, str],
    factory: EventFactory,
    count: int,
    upgrade_seq: int | None = None,
) -> None:
    """The KPI sums of ``page_kpis`` are those of the distinct events ``0 .. count -
    1``, each counted once however often it was sent; ``seen_events`` holds exactly
    their ids, ``first_batch`` null for the ids before event ``upgrade_seq`` (default:
    half of ``count``), which version 1 counted first, and set for the others, which
    version 2 did. ``bootstrap`` and ``topics`` (the source and dead-letter topics) are
    unused: the events are all valid and none is late."""
    del bootstrap, topics
    upgrade = count // 2 if upgrade_seq is None else upgrade_seq
    sums = kpis.sums(cassandra, keyspace)
    assert sums == kpis.expected_sums(factory, range(count), window=WINDOW_S)
    first_batches: dict[str, int | None] = {}
    for row in cassandra.execute(
        f"SELECT event_id, first_batch FROM {keyspace}.seen_events", timeout=120
    ):
        first_batches[row.event_id] = row.first_batch
    print(f"distinct events: {len(first_batches)}; KPI windows (page, window): {len(sums)}")
    ids = [f"e-{factory.seed}-{n}" for n in range(count)]
    assert set(first_batches) == set(ids)
    assert all(first_batches[i] is None for i in ids[:upgrade]), "v1's rows"
    assert all(first_batches[i] is not None for i in ids[upgrade:]), "v2's"
