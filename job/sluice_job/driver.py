"""Wiring the driver: real clients into the runner, failures into exit codes.

Everything that talks to Spark, Kafka or Cassandra is created here, once; the loop
itself lives in ``runner``. Each failure class maps to one exit code and a log line
naming the dependency or field, see ``exitcodes``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cassandra import Unauthorized
from cassandra.cluster import NoHostAvailable, Session
from pyspark.sql import SparkSession

from sluice_api import env as env_names
from sluice_api.exitcodes import ExitCode
from sluice_api.termination import Termination
from sluice_api.termination import write as write_termination
from sluice_api.trigger import LOW_LATENCY_ONE_TASK_RECORDS
from sluice_job import (
    cassandra_access,
    clients,
    hot_standby,
    logs,
    metrics,
    offsets,
    one_task,
    outages,
    reader,
    reset,
    spark,
    spark_auth,
    standby,
    stopping,
    transform,
)
from sluice_job.cassandra_session import Credentials, connect
from sluice_job.checkpoint import (
    CheckpointError,
    CheckpointStore,
    FencedError,
    KeyspaceMissingError,
)
from sluice_job.config import DriverConfig
from sluice_job.control import Control
from sluice_job.deadletter import DeadLetterError, DeadLetters, RejectedWithoutDeadLetterError
from sluice_job.execute import KafkaRecords, Records, SparkExecutor
from sluice_job.groupoffsets import group_name
from sluice_job.kafka_config import KafkaAccess, KafkaCredentialsError
from sluice_job.offsets import TopicPartition
from sluice_job.planner import OffsetOutOfRangeError, Policy
from sluice_job.ports import Observers
from sluice_job.pubsub.client import PubSubConfigError, Subscription
from sluice_job.pubsub.leases import Leases
from sluice_job.pubsub.records import PubSubRecords
from sluice_job.pubsub.runner import PubSubRunner
from sluice_job.pubsub.spool import Spool
from sluice_job.runner import IDLE_MAX, IDLE_MAX_LOW_LATENCY, Progress, Runner
from sluice_job.sinks.cassandra import CassandraSink, SinkSchemaError
from sluice_job.sinks.datastore import DatastoreSink
from sluice_job.sinks.datastore_credentials import CredentialsError, ServiceAccount
from sluice_job.state import States, StateShapeError
from sluice_job.state.access import StaleStateError
from sluice_job.state.schema import StateSchemaError
from sluice_job.tls import TlsMaterial, TlsMaterialError
from sluice_job.watermarks import KafkaUnavailableError, WatermarkReader


def run(cfg: DriverConfig, stop: threading.Event, progress: Progress) -> Termination:
    try:
        return _run(cfg, stop, progress)
    except stopping.StopRequestedError as stopped:
        logs.event("stopped with no batch in flight", left_undone=stopped.step)
        return _stopped(cfg, progress, f"clean stop before {stopped.step}: no batch in flight")
    except FencedError as err:
        fenced = _failed(ExitCode.FENCED, "Fenced", err, cfg, progress)
        return dataclasses.replace(fenced, held_by_epoch=err.held_by)
    except standby.StandbyCheckError as err:
        return _failed(ExitCode.INVALID_CONFIG, "TransformCheckFailed", err, cfg, progress)
    except (
        transform.EntrypointError,
        transform.NondeterministicTransformError,
        one_task.ShufflingTransformError,
        StateSchemaError,
        StateShapeError,
        KeyspaceMissingError,
        reset.ResetError,
        KafkaCredentialsError,
        TlsMaterialError,
        CredentialsError,
        PubSubConfigError,
    ) as err:
        return _failed(ExitCode.INVALID_CONFIG, "InvalidConfig", err, cfg, progress)
    except Unauthorized as err:
        denied = cassandra_access.AccessDeniedError(
            cassandra_access.describe(str(err), clients.keyspace_fields(cfg))
        )
        return _failed(ExitCode.INVALID_CONFIG, "CassandraAccessDenied", denied, cfg, progress)
    except (NoHostAvailable, CheckpointError) as err:
        points = ", ".join(cfg.spec.checkpoint.cassandra.contact_points)
        named = RuntimeError(f"Cassandra checkpoint store at {points}: {err}")
        return _failed(ExitCode.FAILURE, "CassandraUnavailable", named, cfg, progress)
    except KafkaUnavailableError as err:
        return _failed(ExitCode.FAILURE, "KafkaUnavailable", err, cfg, progress)
    except OffsetOutOfRangeError as err:
        return _failed(ExitCode.FAILURE, "OffsetOutOfRange", err, cfg, progress)
    except SinkSchemaError as err:
        return _failed(ExitCode.FAILURE, "SinkSchema", err, cfg, progress)
    except DeadLetterError as err:
        return _failed(ExitCode.FAILURE, "DeadLetterUnavailable", err, cfg, progress)
    except RejectedWithoutDeadLetterError as err:
        return _failed(ExitCode.FAILURE, "RejectedWithoutDeadLetter", err, cfg, progress)
    except Exception as err:  # any other failure fails the batch: no commit, exit 1
        stale = _stale_state(err)
        if stale is not None:
            return _failed(ExitCode.FENCED, "Fenced", stale, cfg, progress)
        return _failed(ExitCode.FAILURE, "BatchFailed", err, cfg, progress)


def _run(cfg: DriverConfig, stop: threading.Event, progress: Progress) -> Termination:
    spec, env = cfg.spec, os.environ
    prometheus = clients.metrics(cfg)
    # A hot standby hears its promotion from its start on, so that one promoted while
    # it gets ready cuts its warm-up short (``standby.get_ready``).
    control = _hot_control(cfg)
    stateful = bool(spec.transform.state) or spec.transform.event_time is not None
    function = transform.load(spec.transform.entrypoint, stateful=stateful)
    checkpoint = spec.checkpoint.cassandra
    credentials = Credentials.from_env(env, env_names.CHECKPOINT_CASSANDRA_CREDENTIALS)
    tls = TlsMaterial.from_env(checkpoint.tls, env, env_names.CHECKPOINT_CASSANDRA_CREDENTIALS)
    session_conf = (
        spark.spark_conf(
            spec,
            env,
            f"sluice-{cfg.namespace}-{cfg.pipeline}",
            env.get("PYSPARK_PYTHON", sys.executable),
        )
        | spark.executor_template(env)
        | spark_auth.driver_conf(env)
    )
    # Spark's JVM is launched (a fork) before any gRPC client exists: gRPC's fork
    # handlers broke one launch in four beside a live channel (the Pub/Sub dead-letter
    # publisher): "epoll_wait error: Bad file descriptor", then JAVA_GATEWAY_EXITED.
    # It starts on a thread of its own while the checkpoint store is reached (no gRPC).
    began = time.monotonic()
    launch = spark.Launch(session_conf, nice=cfg.spark_niceness)
    try:
        # A dependency that is away at start-up is waited for, as during a batch: a
        # driver that exited instead would cost a new epoch per attempt.
        cluster, session = outages.through_outages(
            "connect to the checkpoint store",
            lambda: connect(checkpoint.contact_points, credentials, tls),
            prometheus,
            stop=stop,
        )
        connected = time.monotonic()
        store = CheckpointStore(
            session,
            checkpoint.keyspace,
            cfg.checkpoint_key,
            cfg.code_version,
            history_ttl=checkpoint.history_ttl_seconds,
            legacy=cfg.legacy_checkpoint_key,
        )
        replication = checkpoint.replication.cql() if checkpoint.replication else None
        create_with = replication if checkpoint.create_keyspace else None
        pubsub = spec.source.pubsub is not None
        outages.through_outages(
            "checkpoint schema",
            lambda: store.ensure_schema(create_with, pubsub=pubsub),
            prometheus,
            stop=stop,
        )
        states = outages.through_outages(
            "state tables",
            lambda: clients.states(cfg, session, credentials, tls),
            prometheus,
            stop=stop,
        )
        checked = time.monotonic()
        spark_session = launch.session()
    except BaseException:
        launch.discard()
        raise
    logs.event(
        "spark session started",
        spark_s=round(launch.seconds or 0.0, 3),
        checkpoint_connect_s=round(connected - began, 3),
        checkpoint_schema_s=round(checked - connected, 3),
        waited_for_spark_s=round(time.monotonic() - checked, 3),
        class_archive=spark.class_archive_mapped(
            spark_session, env.get(env_names.SPARK_CLASS_ARCHIVE)
        ),
    )
    try:
        _cancel_jobs_on_stop(spark_session, stop, progress.gate)
        ui = spark_session.sparkContext.uiWebUrl
        if ui:
            logs.event("spark ui", url=ui)
        dead_letters = outages.through_outages(
            "dead-letter topic", lambda: clients.dead_letters(cfg, env), prometheus, stop=stop
        )
        sink = clients.sink(cfg)
        parts = Parts(
            cfg,
            stop,
            progress,
            store,
            spark_session,
            function,
            sink,
            dead_letters,
            prometheus,
            control,
            states,
        )
        runner = _pubsub_runner(parts, session) if pubsub else _kafka_runner(parts)
        if runner is None:  # a standby asked to stop before its turn: it claimed nothing
            return Termination(ExitCode.CLEAN_STOP, "Stopped", "standby stopped unclaimed")
        runner.run()
    finally:
        spark_session.stop()
        cluster.shutdown()
        if control is not None:
            control.close()
    logs.event("stopped cleanly", batch_id=progress.batch_id, records=progress.records)
    return _stopped(cfg, progress, "clean stop")


def _cancel_jobs_on_stop(
    spark_session: SparkSession, stop: threading.Event, gate: stopping.BatchGate
) -> threading.Thread:
    """A stop with no batch in flight cancels Spark's jobs: only a standby's check or
    warm-up can run then, and it would hold the stop up (a warm-up's read of Kafka
    waits out an outage for minutes). A batch in flight is left to finish. Returns the
    thread that waits for the stop."""

    def cancel() -> None:
        stop.wait()
        if not gate.stopping_now:
            return
        try:
            spark_session.sparkContext.cancelAllJobs()
        except Exception as err:  # Spark already stopping: nothing left to cancel
            logs.event("spark jobs not cancelled", level=30, message=str(err)[:500])

    thread = threading.Thread(target=cancel, name="cancel-on-stop", daemon=True)
    thread.start()
    return thread


def _stale_state(err: Exception) -> FencedError | None:
    """A state read that found a later batch's row (``StaleStateError``, raised in a
    Python worker and reaching the driver inside Spark's error): this driver is fenced."""
    name = StaleStateError.__name__
    text = str(err)
    if name not in text:
        return None
    message = text.split(f"{name}: ", 1)[-1].splitlines()[0]
    return FencedError(f"{name}: {message}")


def _stopped(cfg: DriverConfig, progress: Progress, message: str) -> Termination:
    positions = offsets.to_json(progress.positions)
    return Termination(
        ExitCode.CLEAN_STOP, "Stopped", message, progress.batch_id, cfg.epoch, positions
    )


@dataclass(frozen=True)
class Parts:
    """What both sources' loops are wired from."""

    cfg: DriverConfig
    stop: threading.Event
    progress: Progress
    store: CheckpointStore
    spark: SparkSession
    function: transform.TransformFn
    sink: CassandraSink | DatastoreSink
    dead_letters: DeadLetters
    prometheus: metrics.PrometheusObserver
    control: Control | None = None
    """A hot standby's control port, served from the driver's start (``_hot_control``)."""
    states: States | None = None
    """The declared states (``spec.transform.state``), their tables checked."""

    def executor(self, records: Records) -> SparkExecutor:
        return SparkExecutor(
            records,
            self.function,
            self.cfg.options,
            self.sink,
            self.dead_letters,
            self.store,
            self.states,
            lambda: self.store.event_watermark,
            LOW_LATENCY_ONE_TASK_RECORDS if self.cfg.spec.trigger.low_latency else None,
        )

    def timed_out(self, batch_id: int, seconds: float) -> None:
        _timed_out(self.cfg, self.progress, batch_id, seconds)


def _kafka_runner(parts: Parts) -> Runner | None:
    """The Kafka loop; a standby (warm handover) first gets ready and waits for its
    turn: ``None`` if it was asked to stop before (nothing claimed)."""
    cfg, source = parts.cfg, parts.cfg.spec.kafka
    kafka = KafkaAccess.of(
        source.bootstrap_servers, source.security, os.environ, env_names.KAFKA_CREDENTIALS
    )
    group = group_name(cfg.namespace, cfg.pipeline)
    watermarks = WatermarkReader(kafka.librdkafka())
    client = reader.client_config(kafka.java(), group)
    observer = clients.observer(cfg, kafka, parts.prometheus)
    if cfg.standby:
        topics = source.topics
        outages.through_outages(
            "kafka", lambda: watermarks.fetch(topics), parts.prometheus, stop=parts.stop
        )
        lows = functools.partial(_lows, watermarks, topics)
        gap = _standby(parts, client, lows)
        if gap is None:
            return None
        observer = Observers((observer, gap))
    return Runner(
        epoch=cfg.epoch,
        topics=source.topics,
        policy=Policy(
            source.starting_offsets,
            source.on_offset_out_of_range,
            source.max_records_per_partition,
        ),
        interval=cfg.spec.trigger.interval_seconds,
        store=parts.store,
        watermarks=watermarks,
        executor=parts.executor(KafkaRecords(parts.spark, client)),
        stop=parts.stop,
        progress=parts.progress,
        observer=observer,
        rate=clients.rate_control(cfg.spec),
        batch_timeout=cfg.spec.trigger.batch_timeout_seconds,
        idle_max=IDLE_MAX_LOW_LATENCY if cfg.spec.trigger.low_latency else IDLE_MAX,
        on_timeout=parts.timed_out,
        initial_cap=source.backpressure.initial_records_per_partition,
        offset_reset=cfg.spec.offset_reset,
        lag_watermarks=WatermarkReader(kafka.librdkafka()),
    )


def _pubsub_runner(parts: Parts, session: Session) -> PubSubRunner | None:
    cfg, source = parts.cfg, parts.cfg.spec.source.pubsub
    if source is None:
        raise ValueError("source.pubsub is not set")
    if cfg.standby and not _pubsub_standby_turn(parts):
        return None
    key = ServiceAccount.from_env(os.environ, env_names.PUBSUB_CREDENTIALS)
    subscription = Subscription.of(source, key)
    outages.through_outages(
        "pubsub subscription", subscription.check, parts.prometheus, stop=parts.stop
    )
    spool = Spool(
        session,
        cfg.spec.checkpoint.cassandra.keyspace,
        cfg.checkpoint_key,
        source.dedup_window_seconds,
    )
    spool.prepare()
    pubsub_metrics = metrics.PubSubMetrics(cfg.pipeline_id)
    pubsub_metrics.started()
    store = parts.store
    return PubSubRunner(
        epoch=cfg.epoch,
        subscription_id=source.subscription,
        max_messages=source.max_messages_per_batch,
        max_bytes=source.max_bytes_per_batch,
        interval=cfg.spec.trigger.interval_seconds,
        store=store,
        spool=spool,
        subscription=subscription,
        leases=Leases(subscription, source.ack_deadline_seconds),
        records=(records := PubSubRecords(parts.spark, source.subscription)),
        executor=parts.executor(records),
        ownership=lambda: store.load(serial=True).owner == store.owner,
        stop=parts.stop,
        progress=parts.progress,
        observer=parts.prometheus,
        pubsub_observer=pubsub_metrics,
        batch_timeout=cfg.spec.trigger.batch_timeout_seconds,
        on_timeout=parts.timed_out,
    )


def _pubsub_standby_turn(parts: Parts) -> bool:
    """A Pub/Sub pipeline's standby only waits for its turn (its records have another
    schema than the transform check's); whether it came (``False``: asked to stop)."""
    cfg = parts.cfg
    if not cfg.hot:
        return standby.wait_only(
            cfg.pipeline_id,
            cfg.epoch,
            parts.store,
            parts.stop,
            cfg.spec.upgrade.stop_timeout_seconds,
        )
    metrics.STANDBY_READY.labels(cfg.pipeline_id).set(1)
    logs.event("standby ready", epoch=cfg.epoch, checked=False)
    return _promotion(parts, lambda: None) is not None


def _lows(watermarks: WatermarkReader, topics: Sequence[str]) -> dict[TopicPartition, int]:
    """Each partition's oldest retained offset."""
    return {tp: marks.low for tp, marks in watermarks.fetch(topics).items()}


def _standby(
    parts: Parts,
    kafka_config: Mapping[str, str],
    lows: Callable[[], Mapping[TopicPartition, int]],
) -> standby.HandoverGap | None:
    cfg = parts.cfg
    ready = functools.partial(
        standby.get_ready,
        pipeline=cfg.pipeline_id,
        epoch=cfg.epoch,
        spark=parts.spark,
        function=parts.function,
        options=cfg.options,
        sink=parts.sink,
        kafka_config=kafka_config,
        store=parts.store,
        reject_budget=parts.dead_letters.payload_budget,
        lows=lows,
        stop=parts.stop,
        states=parts.states,
    )
    if not cfg.hot:
        control = Control(cfg.metrics_host, cfg.control_port or 0, cfg.epoch).start()
        try:
            return standby.take_over(
                ready,
                pipeline=cfg.pipeline_id,
                epoch=cfg.epoch,
                store=parts.store,
                last_commit=parts.store.committed_at,
                stop=parts.stop,
                timeout=cfg.spec.upgrade.stop_timeout_seconds,
                promoted=control.promoted,
            )
        finally:
            control.close()
    promoted = parts.control.promoted if parts.control is not None else None
    if promoted is not None:
        standby.cancel_warm_up_on(promoted, parts.spark)
    predecessor = _promotion(parts, ready(promoted=promoted))
    if predecessor is None:
        return None
    return standby.HandoverGap(cfg.pipeline_id, cfg.epoch, predecessor)


def _hot_control(cfg: DriverConfig) -> Control | None:
    """A hot standby's control port, served at once; ``None`` for any other driver."""
    if not (cfg.standby and cfg.hot):
        return None
    return Control(cfg.metrics_host, cfg.control_port or 0, cfg.epoch).start()


def _promotion(parts: Parts, warm: Callable[[], object]) -> standby.Predecessor | None:
    """A hot standby, ready: wait for the operator's promotion on its control port,
    warming up again meanwhile (``hot_standby``); the port closes once it is over."""
    cfg = parts.cfg
    control = parts.control or _hot_control(cfg)
    if control is None:
        raise ValueError("a hot standby has a control port")
    try:
        predecessor = hot_standby.wait_for_promotion(
            parts.store,
            cfg.epoch,
            parts.stop,
            control.promoted,
            warm,
            last_commit=parts.store.committed_at,
        )
    finally:
        control.close()
    hot_standby.taken_over(cfg.pipeline_id, cfg.epoch, predecessor)
    return predecessor


def _timed_out(cfg: DriverConfig, progress: Progress, batch_id: int, seconds: float) -> None:
    """A batch hangs (trigger.batchTimeoutSeconds): leave with exit 1 at once, from the
    timer's thread; nothing of the batch was committed, the next driver re-runs it."""
    message = (
        f"batch {batch_id} did not finish within trigger.batchTimeoutSeconds={seconds:g}: "
        "a Spark job or the sink hangs; the batch is not committed"
    )
    logs.event("batch timeout", level=40, batch_id=batch_id, message=message)
    positions = offsets.to_json(progress.positions)
    termination = Termination(
        ExitCode.FAILURE, "BatchTimeout", message, progress.batch_id, cfg.epoch, positions
    )
    write_termination(cfg.termination_log, termination)
    os._exit(int(ExitCode.FAILURE))


def _failed(
    code: ExitCode, reason: str, err: Exception, cfg: DriverConfig, progress: Progress
) -> Termination:
    logs.event(reason, level=40, message=str(err), exit_code=int(code), exc_info=err)
    positions = offsets.to_json(progress.positions)
    return Termination(code, reason, str(err), progress.batch_id, cfg.epoch, positions)
