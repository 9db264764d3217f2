"""Committed positions mirrored into a Kafka consumer group, for Kafka's own tools.

Operators watch consumer lag with ``kafka-consumer-groups.sh``, Burrow or a lag
exporter, all of which read consumer-group offsets. Sluice's offsets live in its
checkpoint, so with ``source.kafka.commitToConsumerGroup`` the driver also writes
each committed batch's positions to the group ``sluice.<namespace>.<name>``.

They are informative only: the driver never reads them (it resumes from the
checkpoint), and they are written after the checkpoint commit, asynchronously,
without ever failing or slowing a batch; a failed write is logged once until
writes succeed again. Kafka accepts them because the group has no members (the
driver never joins it).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from sluice_job import logs
from sluice_job.ports import Committed, NoObserver


def group_name(namespace: str, pipeline: str) -> str:
    return f"sluice.{namespace}.{pipeline}"


class GroupOffsets(NoObserver):
    """The runner's observer that commits positions to the consumer group."""

    def __init__(self, client_config: Mapping[str, str], group: str) -> None:
        self.group = group
        self._admin = AdminClient(dict(client_config))
        self._failing = threading.Event()

    def committed(self, done: Committed) -> None:
        partitions = [
            KafkaTopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in sorted(done.batch.positions.items())
        ]
        request = [ConsumerGroupTopicPartitions(self.group, partitions)]
        try:
            futures = self._admin.alter_consumer_group_offsets(request)
        except Exception as err:  # only informative: never fail a batch for it
            self._report(err)
            return
        for future in futures.values():
            future.add_done_callback(self._done)

    def _done(self, future: Future[Any]) -> None:
        error = future.exception()
        if error is not None:
            self._report(error)
        elif self._failing.is_set():
            self._failing.clear()
            logs.event("consumer group offsets written again", group=self.group)

    def _report(self, error: BaseException) -> None:
        if not self._failing.is_set():
            self._failing.set()
            logs.event(
                "consumer group offsets not written (informative only; the checkpoint "
                "is unaffected)",
                level=30,
                group=self.group,
                message=str(error),
            )
