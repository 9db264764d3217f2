"""Which Spark settings a pipeline may set in ``spec.spark.conf``: the tuning
allow-list.

A tenant who may create a pipeline must not gain a ServiceAccount, a host path or code
from elsewhere through Spark's configuration, so everything but tuning is the
operator's. The model's validator and the CRD's CEL rule
(``sluice_operator.crd_rules``) both take the list from here.
"""

from __future__ import annotations

from typing import Final

SPARK_CONF_KEYS: Final = frozenset(
    {
        "spark.default.parallelism",
        "spark.driver.maxResultSize",
        "spark.executor.heartbeatInterval",
        "spark.executor.memoryOverhead",
        "spark.io.compression.codec",
        "spark.kryoserializer.buffer.max",
        "spark.locality.wait",
        "spark.memory.fraction",
        "spark.memory.offHeap.enabled",
        "spark.memory.offHeap.size",
        "spark.memory.storageFraction",
        "spark.network.timeout",
        "spark.python.worker.memory",
        "spark.python.worker.reuse",
        "spark.rdd.compress",
        "spark.reducer.maxSizeInFlight",
        "spark.shuffle.compress",
        "spark.shuffle.file.buffer",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.files.maxPartitionBytes",
        "spark.sql.session.timeZone",
        "spark.sql.shuffle.partitions",
        "spark.sql.ui.retainedExecutions",
        "spark.task.maxFailures",
        "spark.ui.enabled",
        "spark.ui.retainedJobs",
        "spark.ui.retainedStages",
        "spark.ui.showConsoleProgress",
    }
)
"""Spark settings a pipeline may set: memory, parallelism, shuffle, compression, SQL
tuning, timeouts, the UI. Everything else (the master, identity and service accounts,
pods, volumes and secrets, jars, packages, plugins, extensions, listeners, JVM
options) is the operator's alone: a tenant who may create a pipeline must not gain
a ServiceAccount, a host path or code from elsewhere through it."""
SPARK_CONF_PREFIXES: Final = (
    "spark.sql.adaptive.",
    "spark.sql.execution.arrow.",
    "spark.sql.inMemoryColumnarStorage.",
)
"""Families of tuning settings (adaptive execution, Arrow batches, the columnar cache)."""
SPARK_CONF_MAX: Final = 64


SPARK_CONF_CODECS: Final = ("lz4", "lzf", "snappy", "zstd")
"""The values ``spark.io.compression.codec`` may take: Spark's short names. The setting
also takes a class name, which would have Spark load a class of the tenant's choosing."""
CODEC_KEY: Final = "spark.io.compression.codec"


def spark_conf_allowed(key: str) -> bool:
    """A tuning setting, and none that names a class to load, even in an allowed family
    (``spark.sql.adaptive.customCostEvaluatorClass``)."""
    allowed = key in SPARK_CONF_KEYS or key.startswith(SPARK_CONF_PREFIXES)
    return allowed and "class" not in key.lower()
