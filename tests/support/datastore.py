"""Reading back what the Datastore sink wrote, with the real client, and the keyed
transform the driver tests run with a Datastore sink."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sluice_job.sinks.datastore import DatastoreTarget, connect
from sluice_job.sinks.datastore_retry import Backoff
from sluice_job.transform import TransformResult
from tests.support.transforms import tagged

KIND = "Event"
FAST = Backoff(initial=0.02, maximum=0.2, attempts=6)
"""Backoff for tests: the same policy, short waits."""


def target(
    project: str, host: str, *, kind: str = KIND, backoff: Backoff = FAST
) -> DatastoreTarget:
    return DatastoreTarget(project, kind, None, None, host, backoff)


def entities(project: str, host: str, kind: str = KIND) -> dict[int | str, Any]:
    """Every entity of ``kind`` by key id or name, read with a query."""
    client = connect(target(project, host, kind=kind))
    try:
        return {e.key.id_or_name: e for e in client.query(kind=kind).fetch()}
    finally:
        client.close()


def keyed(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    """The tagged events, each entity keyed by its ``event_id``."""
    result = tagged(records, options)
    return result.with_output(result.output.withColumn("__key__", F.col("event_id")))
