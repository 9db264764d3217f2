"""The driver's clients, each built from the spec: sink, dead letters, state, metrics.

``driver`` wires them into the loop in an order that matters (the Spark session
first, see ``tests/unit/test_driver_start_order.py``); this module only says how each
is made from ``DriverConfig`` and the Secrets' environment, naming the spec field a
misfit comes from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cassandra.cluster import Session

from sluice_api import env as env_names
from sluice_api import secret_refs
from sluice_api.spec import PipelineSpec
from sluice_job import deadletter
from sluice_job import metrics as metrics_
from sluice_job.backpressure import RateControl
from sluice_job.cassandra_session import Credentials
from sluice_job.config import DriverConfig
from sluice_job.deadletter import DeadLetters
from sluice_job.groupoffsets import GroupOffsets, group_name
from sluice_job.kafka_config import KafkaAccess
from sluice_job.ports import Observer, Observers
from sluice_job.pubsub import deadletter as pubsub_deadletter
from sluice_job.sinks.cassandra import CassandraSink, CassandraTarget, SinkSchemaError
from sluice_job.sinks.cassandra_batches import Bounds
from sluice_job.sinks.datastore import DatastoreSink, DatastoreTarget
from sluice_job.sinks.datastore_credentials import ServiceAccount
from sluice_job.state import States
from sluice_job.state import table as state_table
from sluice_job.tls import TlsMaterial


def keyspace_fields(cfg: DriverConfig) -> dict[str, str]:
    """The spec field of each Cassandra keyspace the pipeline names."""
    fields = {cfg.spec.checkpoint.cassandra.keyspace: "checkpoint.cassandra.keyspace"}
    sink = cfg.spec.sink.cassandra
    if sink is not None and sink.keyspace not in fields:
        fields[sink.keyspace] = "sink.cassandra.keyspace"
    return fields


def metrics(cfg: DriverConfig) -> metrics_.PrometheusObserver:
    """Metrics of this pipeline; served over HTTP if ``SLUICE_METRICS_PORT`` is set."""
    port = cfg.metrics_port
    endpoint = metrics_.Endpoint(port, cfg.metrics_host) if port is not None else None
    observer = metrics_.PrometheusObserver(cfg.pipeline_id, endpoint)
    observer.started(cfg.code_version, cfg.epoch)
    return observer


def observer(
    cfg: DriverConfig, kafka: KafkaAccess, prometheus: metrics_.PrometheusObserver
) -> Observer:
    if not cfg.spec.kafka.commit_to_consumer_group:
        return prometheus
    group = GroupOffsets(kafka.librdkafka(), group_name(cfg.namespace, cfg.pipeline))
    return Observers((prometheus, group))


def dead_letters(cfg: DriverConfig, env: Mapping[str, str]) -> DeadLetters:
    target = cfg.spec.dead_letter
    if target is None:
        return deadletter.NoDeadLetters()
    if target.pubsub is not None and cfg.spec.source.pubsub is not None:
        key = ServiceAccount.from_env(env, env_names.PUBSUB_CREDENTIALS)
        return pubsub_deadletter.pubsub(target.pubsub, cfg.spec.source.pubsub, key, cfg.pipeline_id)
    kafka_target = cfg.spec.kafka_dead_letter
    if kafka_target is None:
        raise ValueError("deadLetter.pubsub needs source.pubsub")
    source = cfg.spec.source.kafka
    servers = kafka_target.bootstrap_servers or cfg.spec.kafka.bootstrap_servers
    prefix = secret_refs.dead_letter_prefix(cfg.spec) or env_names.DEAD_LETTER_KAFKA_CREDENTIALS
    access = KafkaAccess.of(servers, kafka_target.security_with(source), env, prefix)
    return deadletter.kafka(access.librdkafka(), kafka_target.topic, cfg.pipeline_id)


def states(
    cfg: DriverConfig, session: Session, credentials: Credentials | None, tls: TlsMaterial | None
) -> States | None:
    """The declared states and event time, each table created or checked against its declaration
    (``state.table``, a misfit raises ``StateSchemaError``), read and written with the
    checkpoint's cluster, credentials and TLS: the state lives beside the offsets."""
    declared, clock = cfg.spec.transform.state, cfg.spec.transform.event_time
    if not declared and clock is None:
        return None
    checkpoint = cfg.spec.checkpoint.cassandra
    owner = f"{cfg.namespace}/{cfg.pipeline}"
    connection = CassandraTarget(
        tuple(checkpoint.contact_points), checkpoint.keyspace, "", credentials, tls=tls
    )
    return state_table.prepare(session, connection, declared, clock, owner)


def rate_control(spec: PipelineSpec) -> RateControl | None:
    source, interval = spec.kafka, spec.trigger.interval_seconds
    if not source.backpressure.enabled:
        return None
    return RateControl.of(
        source.backpressure.target_utilization, interval, source.max_records_per_partition
    )


def sink(cfg: DriverConfig) -> CassandraSink | DatastoreSink:
    if cfg.spec.sink.datastore is not None:
        return DatastoreSink(
            DatastoreTarget.from_spec(cfg.spec.sink.datastore, os.environ),
            order=cfg.spec.sink.order_column,
        )
    target = cfg.spec.sink.cassandra
    if target is None:
        raise SinkSchemaError("set sink.cassandra or sink.datastore")
    return CassandraSink(
        CassandraTarget(
            tuple(target.contact_points),
            target.keyspace,
            target.table,
            Credentials.from_env(os.environ, env_names.SINK_CASSANDRA_CREDENTIALS),
            concurrency=target.concurrency,
            bounds=Bounds(rows=target.batch_rows, bytes=target.batch_bytes),
            tls=TlsMaterial.from_env(target.tls, os.environ, env_names.SINK_CASSANDRA_CREDENTIALS),
        ),
        order=cfg.spec.sink.order_column,
    )
