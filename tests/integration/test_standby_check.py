"""The standby's check of a transform on an empty batch of the source's schema
(``sluice_job.standby.check``), on a real SparkSession: a working transform passes,
one that raises or whose output the sink table cannot take fails with the reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pyspark.sql import DataFrame

from sluice_job import standby, transform
from sluice_job.sinks import SinkSchemaError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


class Table:
    """A sink whose table has no column ``tag``; counts the rows it is asked to write."""

    def write(self, frame: DataFrame, version: int, *, dry: bool = False) -> int:
        if "tag" in frame.columns:
            raise SinkSchemaError("sink table ks.events has no column(s) ['tag']")
        return frame.count()


def test_the_examples_transform_passes_on_an_empty_batch(spark_session: Any) -> None:
    function = transform.load("sluice_job.examples.events:transform")
    standby.check(standby.empty_records(spark_session), function, {}, Table())


def test_a_transform_that_raises_fails_the_check_with_its_error(spark_session: Any) -> None:
    def broken(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
        raise RuntimeError("no such column: pagee")

    with pytest.raises(standby.StandbyCheckError, match="RuntimeError: no such column: pagee"):
        standby.check(standby.empty_records(spark_session), broken, {}, None)


def test_an_output_the_sink_table_cannot_take_fails_the_check(spark_session: Any) -> None:
    def tagged(records: DataFrame, options: Mapping[str, Any]) -> DataFrame:
        return records.selectExpr("CAST(offset AS STRING) AS id", "'v3' AS tag")

    with pytest.raises(standby.StandbyCheckError, match=r"no column\(s\) \['tag'\]"):
        standby.check(standby.empty_records(spark_session), tagged, {}, Table())
