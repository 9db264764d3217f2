"""Reading Kafka's watermarks: the oldest retained offset and the last stable one.

The planner needs them for every partition of the configured topics; two batched
ListOffsets requests per batch fetch them all. The upper bound is the *last stable
offset* (ListOffsets at READ_COMMITTED), not the high watermark: records of a
transaction still open lie between the two, and a batch must never be planned over
them (its ranges would change meaning once the transaction commits or aborts). With
no transactions the two are equal. The driver never joins a consumer group and never
commits to Kafka for recovery: its offsets live in the checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from sluice_job.offsets import TopicPartition, Watermarks


class KafkaUnavailableError(Exception):
    """Kafka did not answer; the message names the brokers and topics."""


class WatermarkReader:
    def __init__(self, client_config: Mapping[str, str], timeout: float = 10.0) -> None:
        self._admin = AdminClient(dict(client_config))
        self._servers = client_config.get("bootstrap.servers", "?")
        self._timeout = timeout

    def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as err:
            raise KafkaUnavailableError(f"Kafka at {self._servers}: {err}") from None
        result: list[TopicPartition] = []
        for topic in topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                reason = found.error if found is not None else "no such topic"
                raise KafkaUnavailableError(f"Kafka topic {topic!r} at {self._servers}: {reason}")
            result.extend(TopicPartition(topic, p) for p in sorted(found.partitions))
        return result

    def fetch(self, topics: Sequence[str]) -> dict[TopicPartition, Watermarks]:
        tps = self.partitions(topics)
        low = self._list(tps, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
        stable = self._list(tps, OffsetSpec.latest())  # type: ignore[no-untyped-call]
        return {tp: Watermarks(low[tp], stable[tp]) for tp in tps}

    def at_time(self, topics: Sequence[str], millis: int) -> dict[TopicPartition, int | None]:
        tps = self.partitions(topics)
        found = self._list(tps, OffsetSpec.for_timestamp(millis))
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def _list(self, tps: Sequence[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, int]:
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in tps}
        futures = self._admin.list_offsets(
            request,
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=self._timeout,
        )
        result = {}
        try:
            for ktp, future in futures.items():
                info = future.result(timeout=self._timeout)
                result[TopicPartition(ktp.topic, ktp.partition)] = int(info.offset)
        except (KafkaException, TimeoutError) as err:
            raise KafkaUnavailableError(f"Kafka at {self._servers}: {err}") from None
        return result
