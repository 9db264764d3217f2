"""Building the driver's SparkSession with defaults suited to small micro-batches.

Defaults (each can be overridden by ``spec.spark.conf``): no locality wait (batches
are short, waiting for a local slot costs more than reading remotely), shuffle
partitions sized to the cores instead of 200, the UI off unless asked for. The
Kafka connector jars come from ``SLUICE_SPARK_JARS`` (comma-separated paths), the
master from ``SLUICE_SPARK_MASTER`` (default ``local[<driver cores>]``), and
Spark-on-Kubernetes settings (JSON) from ``SLUICE_SPARK_CONF``; the operator sets
both when executors run as pods. Python workers run the driver's own interpreter.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

from sluice_job.spec import PipelineSpec


def spark_conf(
    spec: PipelineSpec, env: Mapping[str, str], app_name: str, python: str
) -> dict[str, str]:
    """The session's configuration (a pure function); ``python`` runs the Python
    workers, so they import the same packages (and the user's code) as the driver."""
    cores = spec.spark.driver.cores
    master = env.get("SLUICE_SPARK_MASTER", f"local[{cores}]")
    parallelism = (
        cores
        if master.startswith("local")
        else (spec.spark.executors.instances * spec.spark.executors.cores)
    )
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.driver.memory": spec.spark.driver.memory,
        "spark.executor.memory": spec.spark.executors.memory,
        "spark.executor.cores": str(spec.spark.executors.cores),
        "spark.executor.instances": str(spec.spark.executors.instances),
        "spark.locality.wait": "0s",
        "spark.sql.shuffle.partitions": str(max(1, parallelism)),
        "spark.default.parallelism": str(max(1, parallelism)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        "spark.pyspark.python": python,
    }
    jars = env.get("SLUICE_SPARK_JARS")
    if jars:
        conf["spark.jars"] = jars
    conf.update(json.loads(env.get("SLUICE_SPARK_CONF") or "{}"))
    conf.update(spec.spark.conf)
    return conf


def session(conf: Mapping[str, str]) -> SparkSession:
    # PySpark picks the worker interpreter from the environment, not from the conf.
    os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
