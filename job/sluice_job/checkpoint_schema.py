"""The checkpoint store's tables, and which DDL a keyspace still needs.

A purely computational module: :func:`missing` compares what ``system_schema`` says
the keyspace holds with the tables and columns this version needs, and returns only
the statements that are missing; ``CheckpointStore.ensure_schema`` runs them. A
keyspace whose tables are current therefore gets no DDL at all, so the Cassandra role
a pipeline runs as needs ``SELECT`` and ``MODIFY`` on those tables only
(docs/checkpoint-store.md): ``CREATE TABLE IF NOT EXISTS`` would need ``CREATE`` on
the keyspace even when the table exists, since Cassandra checks the permission first.

``python -m sluice_job --checkpoint-schema KEYSPACE`` prints :func:`statements`, for
an administrator who creates the tables before granting a team's role.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Final

TABLES: Final = ("schema_version", "checkpoints", "batches", "claims")
PUBSUB_TABLES: Final = ("pubsub_spool", "pubsub_committed")
"""Only pipelines with a Pub/Sub source use these (``pubsub.spool``): the messages of
planned batches, and the ids of committed messages, kept to drop redeliveries."""

_CREATE: Final = {
    "schema_version": "CREATE TABLE IF NOT EXISTS {ks}.schema_version ("
    "component text PRIMARY KEY, version int)",
    "checkpoints": """CREATE TABLE IF NOT EXISTS {ks}.checkpoints (
            pipeline text PRIMARY KEY, format int, epoch bigint, owner uuid,
            batch_id bigint, offsets text, code_version text, updated_at timestamp,
            released boolean, planned_id bigint, planned text, last_ranges text,
            last_records bigint, last_started_at timestamp, write_version bigint)""",
    "batches": """CREATE TABLE IF NOT EXISTS {ks}.batches (
            pipeline text, batch_id bigint, epoch bigint, owner uuid, code_version text,
            ranges text, records bigint, started_at timestamp, committed_at timestamp,
            lost text,
            PRIMARY KEY (pipeline, batch_id)) WITH CLUSTERING ORDER BY (batch_id DESC)""",
    "claims": """CREATE TABLE IF NOT EXISTS {ks}.claims (
            pipeline text, epoch bigint, owner uuid, code_version text,
            batch_id_at_claim bigint, claimed_at timestamp,
            PRIMARY KEY (pipeline, epoch)) WITH CLUSTERING ORDER BY (epoch DESC)""",
    "pubsub_spool": """CREATE TABLE IF NOT EXISTS {ks}.pubsub_spool (
            pipeline text, spool text, seq bigint, message_id text, data blob,
            attributes map<text, text>, publish_time timestamp, ordering_key text,
            PRIMARY KEY ((pipeline, spool), seq))""",
    "pubsub_committed": """CREATE TABLE IF NOT EXISTS {ks}.pubsub_committed (
            pipeline text, hour int, bucket int, message_id text, batch_id bigint,
            PRIMARY KEY ((pipeline, hour, bucket), message_id))""",
}

ADDED_COLUMNS: Final = (
    # The offsets retention deleted from a recovered batch (tables made before it).
    ("batches", "lost", "text"),
    # The last committed batch's write version (rows made before versions).
    ("checkpoints", "write_version", "bigint"),
    # Offset resets: the ids applied, the last one's record (for its history row),
    # and the reset column of the history (tables made before resets).
    ("checkpoints", "applied_resets", "set<text>"),
    ("checkpoints", "last_reset", "text"),
    ("batches", "reset", "text"),
    # Cluster ids (sluice_api.cluster): a legacy row names the key that adopted it,
    # and the adopting row names the legacy key it came from.
    ("checkpoints", "adopted_by", "text"),
    ("checkpoints", "adopted_from", "text"),
    # The planned batch whose dead letters are durable: a re-run skips them.
    ("checkpoints", "letters_durable", "bigint"),
    # The event-time watermark, in milliseconds (spec.transform.eventTime).
    ("checkpoints", "event_watermark", "bigint"),
)


def statements(ks: str) -> list[str]:
    """Every statement that makes the tables of this version in keyspace ``ks``, for
    Kafka and Pub/Sub sources."""
    return missing(ks, {}, pubsub=True)


def missing(ks: str, existing: Mapping[str, Set[str]], *, pubsub: bool = False) -> list[str]:
    """The DDL keyspace ``ks`` still needs, given ``existing``: its tables and, per
    table, the names of its columns (as ``system_schema.columns`` lists them); the
    Pub/Sub source's tables with ``pubsub``."""
    tables = TABLES + PUBSUB_TABLES if pubsub else TABLES
    result = [_CREATE[table].format(ks=ks) for table in tables if table not in existing]
    result += [
        f"ALTER TABLE {ks}.{table} ADD IF NOT EXISTS {column} {kind}"
        for table, column, kind in ADDED_COLUMNS
        if column not in existing.get(table, ())
    ]
    return result
