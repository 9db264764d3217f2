"""Prometheus metrics of the driver, defined once per process with fixed label sets.

Importing this module defines the metrics and nothing else; the HTTP endpoint
starts only when the driver asks for it at start-up (``SLUICE_METRICS_PORT``). If
the port is taken, the driver runs on and tries again after each batch: metrics
never stand in the way of data. (The port is the pod's own, on the local stack too,
where every pod gets its own loopback address.)
Every metric carries ``pipeline`` (``namespace/name``), so alerts and dashboards
need no join. Counters count *committed* batches: a batch re-run after a failure
or a restart is counted once per process that commits it.

``sluice_batch_failures_total`` and ``sluice_commit_conflicts_total`` move just
before the driver exits (fail-fast), so a scrape sees them only if it lands in
that moment; the operator's restart count is their durable counterpart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from prometheus_client import Counter, Gauge, Histogram, Info, start_http_server

from sluice_api import metrics as names
from sluice_job import logs
from sluice_job.checkpoint_rows import Checkpoint
from sluice_job.offsets import Positions, TopicPartition, Watermarks
from sluice_job.planner import Skip
from sluice_job.ports import Committed

SECONDS_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
PIPELINE: Final = ("pipeline",)
PARTITION: Final = ("pipeline", "topic", "partition")


class Phase(StrEnum):
    READ = "read"
    TRANSFORM = "transform"
    DEAD_LETTER = "dead_letter"
    WRITE = "write"
    COMMIT = "commit"


BATCHES = Counter(names.BATCHES, "Micro-batches committed.", PIPELINE)
RECORDS_IN = Counter(names.RECORDS_IN, "Records read by committed batches.", PIPELINE)
RECORDS_OUT = Counter(
    names.RECORDS_OUT, "Rows the transform produced for the sink, committed.", PIPELINE
)
RECORDS_REJECTED = Counter(
    names.RECORDS_REJECTED,
    "Records the transform rejected, written to the dead-letter topic, committed.",
    PIPELINE,
)
RECORDS_LATE = Counter(
    names.RECORDS_LATE,
    "Records behind the event-time watermark (dead-lettered or counted), committed.",
    PIPELINE,
)
EVENT_WATERMARK = Gauge(
    names.EVENT_WATERMARK,
    "The event-time watermark the last commit left, Unix seconds.",
    PIPELINE,
)
RECORDS_SKIPPED = Counter(
    names.RECORDS_SKIPPED,
    "Records deleted before they were read, by retention or with a recreated topic "
    "(onOffsetOutOfRange: earliest).",
    PARTITION,
)
OFFSET_RESETS = Counter(
    names.OFFSET_RESETS,
    "Checkpoints found beyond their partition's end (topic recreated or truncated); "
    "reading started again at the earliest offset (onOffsetOutOfRange: earliest).",
    PARTITION,
)
OFFSET_RESET_FROM = Gauge(
    names.OFFSET_RESET_FROM, "Committed offset of the partition's last reset.", PARTITION
)
OFFSET_RESET_TO = Gauge(
    names.OFFSET_RESET_TO, "Offset the partition's last reset resumed at.", PARTITION
)
PHASE_SECONDS = Histogram(
    names.BATCH_PHASE_SECONDS,
    "Seconds per phase of committed batches: read, transform, dead_letter, write, commit.",
    ("pipeline", "phase"),
    buckets=SECONDS_BUCKETS,
)
STATE_SECONDS = Histogram(
    names.STATE_SECONDS,
    "Seconds a committed batch's requests to its states' tables took, summed over its "
    "tasks: read (lookups, the versions a write replaces, the open-windows index), write.",
    ("pipeline", "request"),
    buckets=SECONDS_BUCKETS,
)
STATE_KEYS = Counter(
    names.STATE_KEYS,
    "Keys committed batches read from and wrote to their states' tables.",
    ("pipeline", "request"),
)
BATCH_SECONDS = Histogram(
    names.BATCH_SECONDS,
    "Seconds of committed batches, from their start to their commit.",
    PIPELINE,
    buckets=SECONDS_BUCKETS,
)
LAG = Gauge(
    names.CONSUMER_LAG,
    "Records in Kafka from where the driver reads (the committed offset, or the starting "
    "offset before any commit) to the last stable offset.",
    PARTITION,
)
LAST_COMMIT = Gauge(names.LAST_COMMIT_TIMESTAMP, "Unix time of the last commit.", PIPELINE)
LAST_BATCH = Gauge(names.LAST_COMMITTED_BATCH, "Id of the last committed batch.", PIPELINE)
CAP = Gauge(
    names.RECORDS_PER_PARTITION_CAP,
    "Per-partition cap the next batch is planned with (moves with backpressure).",
    PIPELINE,
)
COMMIT_CONFLICTS = Counter(
    names.COMMIT_CONFLICTS,
    "Plans or commits refused because a newer epoch holds the pipeline (fenced).",
    PIPELINE,
)
BATCH_FAILURES = Counter(names.BATCH_FAILURES, "Batches that failed before their commit.", PIPELINE)
DEPENDENCY_AVAILABLE = Gauge(
    names.DEPENDENCY_AVAILABLE,
    "1 while the driver reaches the dependency, 0 while it waits for it to come back.",
    ("pipeline", names.DEPENDENCY_LABEL),
)
DEPENDENCY_RETRIES = Counter(
    names.DEPENDENCY_RETRIES,
    "Attempts of a batch (or of the next plan) that met an unavailable dependency.",
    ("pipeline", names.DEPENDENCY_LABEL),
)
EPOCH = Gauge(names.EPOCH, "Epoch of this driver.", PIPELINE)
PUBSUB_PULLED = Counter(names.PUBSUB_PULLED, "Pub/Sub deliveries pulled.", PIPELINE)
PUBSUB_ACKED = Counter(
    names.PUBSUB_ACKED, "Pub/Sub messages acknowledged after their batch's commit.", PIPELINE
)
PUBSUB_ACK_FAILURES = Counter(
    names.PUBSUB_ACK_FAILURES,
    "Acknowledgements that failed (the messages come back and are dropped as repeats).",
    PIPELINE,
)
PUBSUB_REDELIVERED = Counter(
    names.PUBSUB_REDELIVERED,
    "Deliveries of a message the driver already held or a batch already took.",
    PIPELINE,
)
PUBSUB_DEDUPLICATED = Counter(
    names.PUBSUB_DEDUPLICATED,
    "Redeliveries dropped because a committed batch had the message.",
    PIPELINE,
)
PUBSUB_HELD = Gauge(
    names.PUBSUB_HELD, "Pub/Sub messages pulled and not yet acknowledged.", PIPELINE
)
PUBSUB_OLDEST_AGE = Gauge(
    names.PUBSUB_OLDEST_AGE,
    "Seconds since the oldest message the driver holds unacknowledged was published.",
    PIPELINE,
)
STANDBY_READY = Gauge(
    names.STANDBY_READY,
    "1 once this driver, started as a standby (warm handover), is ready to take over.",
    PIPELINE,
)
HANDOVER_GAP = Gauge(
    names.HANDOVER_GAP,
    "Seconds from the previous epoch's last commit to this driver's first (a standby "
    "that took over).",
    PIPELINE,
)
DRIVER = Info(names.DRIVER_INFO, "Code version of the driver and the pipeline it runs.")


@dataclass
class Endpoint:
    """The HTTP endpoint on ``host:port`` (all interfaces when ``host`` is empty),
    started by :meth:`ensure`."""

    port: int
    host: str = ""
    serving: bool = False
    _refused: bool = field(default=False, repr=False)

    def ensure(self) -> None:
        """Serve, unless already serving; a taken port is logged once, not raised."""
        if self.serving:
            return
        try:
            start_http_server(self.port, addr=self.host or "0.0.0.0")
        except OSError as err:
            if not self._refused:
                self._refused = True
                logs.event(
                    "metrics not served yet: will retry after each batch",
                    level=40,
                    port=self.port,
                    message=f"SLUICE_METRICS_PORT={self.port}: {err.strerror}",
                )
            return
        self.serving = True
        logs.event("metrics served", port=self.port, host=self.host or "0.0.0.0")


@dataclass(frozen=True)
class PrometheusObserver:
    """The runner's observer that keeps the metrics of one pipeline."""

    pipeline: str
    endpoint: Endpoint | None = None

    def started(self, code_version: str, epoch: int) -> None:
        """Publish who runs, and every per-pipeline series at zero, so a rate or an
        alert has a starting point before the first batch."""
        DRIVER.info({"pipeline": self.pipeline, "code_version": code_version})
        EPOCH.labels(self.pipeline).set(epoch)
        for counter in (RECORDS_IN, RECORDS_OUT, RECORDS_REJECTED, BATCHES, BATCH_FAILURES):
            counter.labels(self.pipeline)
        COMMIT_CONFLICTS.labels(self.pipeline)
        if self.endpoint is not None:
            self.endpoint.ensure()

    def resumed(self, checkpoint: Checkpoint) -> None:
        """The claimed checkpoint's last batch, whichever epoch committed it: the
        operator's status follows the checkpoint from the claim on, not from this
        driver's first commit (a batch of 0: nothing committed yet)."""
        LAST_BATCH.labels(self.pipeline).set(checkpoint.batch_id)
        if checkpoint.committed_at is not None:
            LAST_COMMIT.labels(self.pipeline).set(checkpoint.committed_at.timestamp())

    def lag(self, marks: Mapping[TopicPartition, Watermarks], positions: Positions) -> None:
        """``positions``: where reading starts (``planner.starts``), committed or not."""
        for tp, mark in marks.items():
            position = positions.get(tp, mark.low)
            LAG.labels(self.pipeline, tp.topic, str(tp.partition)).set(max(0, mark.high - position))

    def cap(self, records_per_partition: int) -> None:
        CAP.labels(self.pipeline).set(records_per_partition)

    def skipped(self, skip: Skip) -> None:
        where = (self.pipeline, skip.tp.topic, str(skip.tp.partition))
        RECORDS_SKIPPED.labels(*where).inc(skip.count)
        if skip.beyond_end:
            OFFSET_RESETS.labels(*where).inc()
            OFFSET_RESET_FROM.labels(*where).set(skip.committed)
            OFFSET_RESET_TO.labels(*where).set(skip.resumed_at)

    def committed(self, done: Committed) -> None:
        if self.endpoint is not None:
            self.endpoint.ensure()
        BATCHES.labels(self.pipeline).inc()
        LAST_COMMIT.labels(self.pipeline).set(time.time())
        LAST_BATCH.labels(self.pipeline).set(done.batch.batch_id)
        BATCH_SECONDS.labels(self.pipeline).observe(done.batch_seconds)
        self._phase(Phase.COMMIT, done.commit_seconds)
        times = done.times
        if times is None:
            return
        RECORDS_IN.labels(self.pipeline).inc(times.records_in)
        RECORDS_OUT.labels(self.pipeline).inc(times.records_out)
        RECORDS_REJECTED.labels(self.pipeline).inc(times.records_rejected)
        if times.records_late:
            RECORDS_LATE.labels(self.pipeline).inc(times.records_late)
        if times.event_watermark is not None:
            EVENT_WATERMARK.labels(self.pipeline).set(times.event_watermark / 1000)
        self._phase(Phase.READ, times.read)
        self._phase(Phase.TRANSFORM, times.transform)
        self._phase(Phase.DEAD_LETTER, times.dead_letter)
        self._phase(Phase.WRITE, times.write)
        if times.state is not None:
            io = times.state
            STATE_SECONDS.labels(self.pipeline, "read").observe(io.read_seconds)
            STATE_SECONDS.labels(self.pipeline, "write").observe(io.write_seconds)
            STATE_KEYS.labels(self.pipeline, "read").inc(io.keys_read)
            STATE_KEYS.labels(self.pipeline, "write").inc(io.keys_written)

    def failed(self, *, fenced: bool) -> None:
        BATCH_FAILURES.labels(self.pipeline).inc()
        if fenced:
            COMMIT_CONFLICTS.labels(self.pipeline).inc()

    def dependency(self, name: str, *, available: bool, detail: str = "") -> None:
        DEPENDENCY_AVAILABLE.labels(self.pipeline, name).set(1 if available else 0)
        if not available:
            DEPENDENCY_RETRIES.labels(self.pipeline, name).inc()

    def _phase(self, phase: Phase, seconds: float) -> None:
        PHASE_SECONDS.labels(self.pipeline, phase.value).observe(seconds)


@dataclass(frozen=True)
class PubSubMetrics:
    """The Pub/Sub loop's observer (``pubsub.runner.PubSubObserver``).

    The oldest held message's age is computed at each scrape from its publish time,
    so it grows while a batch waits for a dependency (``SluicePubSubMessagesAging``),
    rather than keeping the age it had when the loop last reported."""

    pipeline: str
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    def started(self) -> None:
        for counter in (PUBSUB_PULLED, PUBSUB_ACKED, PUBSUB_ACK_FAILURES, PUBSUB_REDELIVERED):
            counter.labels(self.pipeline)
        PUBSUB_DEDUPLICATED.labels(self.pipeline)
        PUBSUB_HELD.labels(self.pipeline).set(0)

    def pulled(self, count: int) -> None:
        PUBSUB_PULLED.labels(self.pipeline).inc(count)

    def repeats(self, redelivered: int, deduplicated: int) -> None:
        PUBSUB_REDELIVERED.labels(self.pipeline).inc(redelivered)
        PUBSUB_DEDUPLICATED.labels(self.pipeline).inc(deduplicated)

    def acked(self, count: int, *, failed: int = 0) -> None:
        PUBSUB_ACKED.labels(self.pipeline).inc(count)
        PUBSUB_ACK_FAILURES.labels(self.pipeline).inc(failed)

    def held(self, count: int, oldest_published: datetime | None) -> None:
        PUBSUB_HELD.labels(self.pipeline).set(count)
        clock = self.clock

        def age() -> float:
            if oldest_published is None:
                return 0.0
            return max(0.0, (clock() - oldest_published).total_seconds())

        PUBSUB_OLDEST_AGE.labels(self.pipeline).set_function(age)
