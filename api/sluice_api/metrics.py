"""Metric names both sides depend on: the driver's that the operator reads from a
running driver (``sluice_operator.progress``) and that the alerts use, and the
operator's per-pipeline series that the alerts use.

Names are without Prometheus's ``_total`` suffix for counters, as
``prometheus_client`` takes them. A unit test checks that every series the chart's
alert rules name is one of these.
"""

from typing import Final

# The driver's (sluice_job.metrics), every series labelled with ``pipeline``
# (``namespace/name``).
BATCHES: Final = "sluice_batches"
RECORDS_IN: Final = "sluice_records_in"
RECORDS_OUT: Final = "sluice_records_out"
RECORDS_REJECTED: Final = "sluice_records_rejected"
RECORDS_SKIPPED: Final = "sluice_records_skipped"
RECORDS_LATE: Final = "sluice_late_records"
"""Records behind the event-time watermark (``spec.transform.eventTime``), committed."""
EVENT_WATERMARK: Final = "sluice_event_watermark_seconds"
"""The event-time watermark the last commit left, Unix seconds."""
OFFSET_RESETS: Final = "sluice_offset_resets"
"""Times a partition's checkpoint was beyond its end (topic recreated or truncated)
and reading started again at its earliest offset; labelled topic and partition."""
OFFSET_RESET_FROM: Final = "sluice_offset_reset_from"
OFFSET_RESET_TO: Final = "sluice_offset_reset_to"
"""The committed offset and the offset reading resumed at, of a partition's last reset."""
BATCH_PHASE_SECONDS: Final = "sluice_batch_phase_seconds"
STATE_SECONDS: Final = "sluice_state_seconds"
"""Per committed batch of a stateful transform, the seconds its requests to the
states' tables took, summed over its tasks; labelled ``request`` (read, write)."""
STATE_KEYS: Final = "sluice_state_keys"
"""Keys the committed batches read from and wrote to their states' tables; labelled
``request``."""
BATCH_SECONDS: Final = "sluice_batch_seconds"
CONSUMER_LAG: Final = "sluice_consumer_lag"
LAST_COMMIT_TIMESTAMP: Final = "sluice_last_commit_timestamp_seconds"
LAST_COMMITTED_BATCH: Final = "sluice_last_committed_batch_id"
RECORDS_PER_PARTITION_CAP: Final = "sluice_records_per_partition_cap"
COMMIT_CONFLICTS: Final = "sluice_commit_conflicts"
BATCH_FAILURES: Final = "sluice_batch_failures"
EPOCH: Final = "sluice_epoch"
DRIVER_INFO: Final = "sluice_driver"
DEPENDENCY_AVAILABLE: Final = "sluice_dependency_available"
"""1 while the driver reaches ``dependency`` (cassandra, kafka, datastore), 0 while it
waits for it to come back; labelled ``pipeline`` and ``dependency``."""
DEPENDENCY_RETRIES: Final = "sluice_dependency_retries"
# A Pub/Sub source's (sluice_job.pubsub): deliveries pulled, messages acknowledged
# (and acknowledgements that failed), repeats (deliveries of a message already held or
# taken by a batch) and, of those, the ones dropped because a committed batch had the
# message; what the driver holds unacknowledged and the age of its oldest message.
PUBSUB_PULLED: Final = "sluice_pubsub_messages_pulled"
PUBSUB_ACKED: Final = "sluice_pubsub_messages_acked"
PUBSUB_ACK_FAILURES: Final = "sluice_pubsub_ack_failures"
PUBSUB_REDELIVERED: Final = "sluice_pubsub_messages_redelivered"
PUBSUB_DEDUPLICATED: Final = "sluice_pubsub_messages_deduplicated"
PUBSUB_HELD: Final = "sluice_pubsub_messages_held"
PUBSUB_OLDEST_AGE: Final = "sluice_pubsub_oldest_unacked_message_age_seconds"
STANDBY_READY: Final = "sluice_standby_ready"
"""1 once a standby driver (WarmHandover) is ready to take over: Spark started, Kafka
and the stores reached, the transform checked; what the operator waits for."""
HANDOVER_GAP: Final = "sluice_handover_gap_seconds"
"""Seconds from the previous epoch's last commit to this driver's first (a standby
that took over)."""
DEPENDENCY_LABEL: Final = "dependency"

PIPELINE_LABEL: Final = "pipeline"

# The operator's (sluice_operator.metrics).
OPERATOR_PIPELINE_PHASE: Final = "sluice_operator_pipeline_phase"
OPERATOR_PIPELINE_TRANSITIONS: Final = "sluice_operator_pipeline_transitions"
OPERATOR_PIPELINE_RESTARTS: Final = "sluice_operator_pipeline_restarts"
OPERATOR_PIPELINE_EPOCH: Final = "sluice_operator_pipeline_epoch"
OPERATOR_PIPELINE_TRIGGER: Final = "sluice_operator_pipeline_trigger_interval_seconds"

DRIVER: Final = (
    BATCHES,
    RECORDS_IN,
    RECORDS_OUT,
    RECORDS_REJECTED,
    RECORDS_SKIPPED,
    RECORDS_LATE,
    EVENT_WATERMARK,
    OFFSET_RESETS,
    OFFSET_RESET_FROM,
    OFFSET_RESET_TO,
    BATCH_PHASE_SECONDS,
    STATE_SECONDS,
    STATE_KEYS,
    BATCH_SECONDS,
    CONSUMER_LAG,
    LAST_COMMIT_TIMESTAMP,
    LAST_COMMITTED_BATCH,
    RECORDS_PER_PARTITION_CAP,
    COMMIT_CONFLICTS,
    BATCH_FAILURES,
    EPOCH,
    DRIVER_INFO,
    DEPENDENCY_AVAILABLE,
    DEPENDENCY_RETRIES,
    PUBSUB_PULLED,
    PUBSUB_ACKED,
    PUBSUB_ACK_FAILURES,
    PUBSUB_REDELIVERED,
    PUBSUB_DEDUPLICATED,
    PUBSUB_HELD,
    PUBSUB_OLDEST_AGE,
    STANDBY_READY,
    HANDOVER_GAP,
)
OPERATOR: Final = (
    OPERATOR_PIPELINE_PHASE,
    OPERATOR_PIPELINE_TRANSITIONS,
    OPERATOR_PIPELINE_RESTARTS,
    OPERATOR_PIPELINE_EPOCH,
    OPERATOR_PIPELINE_TRIGGER,
)
