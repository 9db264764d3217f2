"""Executing one planned batch on Spark: read the exact ranges, transform, write.

Input and output are persisted for the duration of the batch so that each phase
is timed on its own and the input is read from Kafka once, even when the transform
uses it twice (output and rejects); both are released when the batch ends.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from sluice_job import failpoints, reader
from sluice_job.checkpoint import Batch
from sluice_job.runner import PhaseTimes
from sluice_job.transform import TransformFn
from sluice_job.write_order import write_version


class Sink(Protocol):
    def write(self, frame: DataFrame, version: int) -> None: ...


@dataclass
class SparkExecutor:
    spark: SparkSession
    kafka_config: Mapping[str, str]
    transform: TransformFn
    options: Mapping[str, Any]
    sink: Sink

    def execute(self, batch: Batch, epoch: int) -> PhaseTimes:
        failpoints.phase("read", batch.batch_id)
        started = time.perf_counter()
        records = reader.read(self.spark, self.kafka_config, batch.ranges, batch.batch_id)
        records = records.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            records.count()
            read_done = time.perf_counter()
            output = self.transform(records, self.options).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                rows_out = output.count()
                transform_done = time.perf_counter()
                failpoints.phase("write", batch.batch_id)
                self.sink.write(output, write_version(batch.batch_id, epoch))
            finally:
                output.unpersist()
        finally:
            records.unpersist()
        written = time.perf_counter()
        return PhaseTimes(
            read=read_done - started,
            transform=transform_done - read_done,
            write=written - transform_done,
            records_out=rows_out,
        )
