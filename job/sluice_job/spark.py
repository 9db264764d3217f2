"""Building the driver's SparkSession with defaults suited to small micro-batches.

A micro-batch is a few short Spark jobs every few seconds, not one long job, so
Spark's defaults (tuned for big batch jobs) cost latency. Each default below can be
overridden by ``spec.spark.conf``; docs/tuning.md explains them with measurements.
``spec.spark.conf`` takes tuning settings only (``sluice_api.spark_conf.SPARK_CONF_KEYS``),
and the operator's Kubernetes settings are applied after it.

* ``spark.locality.wait=0s``: a task runs on the first free core. Waiting (3 s by
  default) for a core local to the data costs more than reading a few megabytes
  over the network, and the Kafka partitions have no locality on executors anyway.
* ``spark.sql.shuffle.partitions`` and ``spark.default.parallelism`` = the cores
  (driver cores in local mode, executors x cores otherwise) instead of 200: a
  shuffle of a small batch into 200 partitions is 200 tiny tasks to schedule.
* UI off (``spec.spark.ui.enabled`` turns it on, port 4040), and the status store
  keeps the last 100 jobs and stages and 50 SQL executions (not 1000 each): a
  pipeline runs millions of jobs, nobody browses them, and their history is driver
  memory.
* Python workers are reused (``spark.python.worker.reuse``) and run the driver's
  own interpreter, so they import the same packages (and the user's code), and the
  sinks' connections opened in a worker live across batches.
* Time zone UTC, so timestamps do not depend on the node's zone.
* The JVMs compile with C1 only (``spec.spark.jit: C1``, ``-XX:TieredStopAtLevel=1``):
  a micro-batch is many short jobs, and C2's optimising recompiles of Spark's code
  cost more CPU than they save; in a fresh JVM on two cores the session's start took
  4.2 CPU-seconds instead of 6.7-7.1 and the first batch 7.0 instead of 10.6-11.7,
  and after 600,000 records a batch of 12,000 still cost 0.82 CPU-seconds against
  1.08 (docs/tuning.md).

* The JVM runs at niceness 10 (``SLUICE_SPARK_NICENESS``), with its tasks' threads and
  Python workers, while the driver's own threads (planning, the checkpoint's
  lightweight transactions, the control port) keep the container's priority. Spark's
  work is throughput, the commit is latency: on a driver whose cores are busy with
  tasks, the commit's threads otherwise wait for a core after every round trip (the
  commit's tail in docs/tuning.md). Raising niceness needs no capability; a node's
  CPU quota for the container still applies to all its threads alike.

Caching is decided per batch in ``execute`` (input and rejects only). The Kafka
connector jars come from ``SLUICE_SPARK_JARS`` (comma-separated paths), the master
from ``SLUICE_SPARK_MASTER`` (default ``local[<driver cores>]``), and
Spark-on-Kubernetes settings (JSON) from ``SLUICE_SPARK_CONF``; the operator sets
both when executors run as pods, and the executor pods' template (a Pod as JSON) in
``SLUICE_EXECUTOR_POD_TEMPLATE``, which :func:`executor_template` writes to the file
Spark reads (``spark.kubernetes.executor.podTemplateFile``).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession

from sluice_api import env as names
from sluice_api.spark import JIT_OPTIONS, UI_PORT
from sluice_api.spec import PipelineSpec
from sluice_job import logs

LOOPBACK: Final = "127.0.0.1"
ARCHIVE_OPTION: Final = "-XX:SharedArchiveFile="
"""The JVM option naming the class data sharing archive to map."""
REDACTED_OPTIONS = r"(?i)url|jaas|ssl\.(key|keystore|truststore)"
"""Spark's default (``url``) and every Kafka option that can hold a secret."""


def spark_conf(
    spec: PipelineSpec, env: Mapping[str, str], app_name: str, python: str
) -> dict[str, str]:
    """The session's configuration (a pure function); ``python`` runs the Python
    workers, so they import the same packages (and the user's code) as the driver."""
    cores = spec.spark.driver.cores
    master = env.get(names.SPARK_MASTER, f"local[{cores}]")
    parallelism = (
        cores
        if master.startswith("local")
        else (spec.spark.executors.instances * spec.spark.executors.cores)
    )
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.driver.memory": spec.spark.driver.memory,
        "spark.locality.wait": "0s",
        "spark.sql.shuffle.partitions": str(max(1, parallelism)),
        "spark.default.parallelism": str(max(1, parallelism)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # The UI, where on, shows and never acts: no kill links for jobs and stages.
        "spark.ui.killEnabled": "false",
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.sql.ui.retainedExecutions": "50",
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        "spark.pyspark.python": python,
        # Plans and the UI print a source's options: hide the Kafka SASL login and
        # TLS keys (Spark's default hides only keys or values naming a password).
        "spark.sql.redaction.options.regex": REDACTED_OPTIONS,
    }
    if master.startswith("local"):
        conf |= LOCAL_RPC
    else:
        # Executors exist only on a cluster; spark-submit refuses 0 instances even in
        # local mode, where the driver's cores do the work.
        conf["spark.executor.memory"] = spec.spark.executors.memory
        conf["spark.executor.cores"] = str(spec.spark.executors.cores)
        conf["spark.executor.instances"] = str(spec.spark.executors.instances)
    jars = env.get(names.SPARK_JARS)
    if jars:
        conf["spark.jars"] = jars
    conf.update(jvm_options(spec, env, executors=not master.startswith("local")))
    conf.update(spec.spark.conf)  # tuning only: the spec model refuses the rest
    conf.update(observability(spec))
    conf.update(json.loads(env.get(names.SPARK_CONF) or "{}"))  # the operator's, last
    return conf


LOCAL_RPC: Final = {
    "spark.driver.bindAddress": LOOPBACK,
    "spark.driver.host": LOOPBACK,
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
}
"""In local mode nothing outside the driver's JVM talks to its RPC endpoint and block
manager, which take Java-serialized messages: they listen on loopback only (Spark's
default is the host's address, reachable from every pod), and authenticated and
encrypted all the same (in local mode Spark makes a secret per application itself).
With executors the operator sets the pod's address and a Secret it made."""


def jvm_options(spec: PipelineSpec, env: Mapping[str, str], *, executors: bool) -> dict[str, str]:
    """The JVM options of the driver and, with ``executors``, theirs (a pure function):
    ``spec.spark.jit``'s (nothing for ``Tiered``, the JVM's default), and for the
    driver the image's class data sharing archive (:data:`names.SPARK_CLASS_ARCHIVE`),
    which the JVM uses when it matches its own build and class path and otherwise
    ignores without a word (:func:`class_archive_mapped`). The executors' JVMs start
    with another class path, which the archive was not made for."""
    jit = JIT_OPTIONS[spec.spark.jit]
    archive = env.get(names.SPARK_CLASS_ARCHIVE)
    driver = " ".join(o for o in (jit, f"{ARCHIVE_OPTION}{archive}" if archive else "") if o)
    conf = {"spark.driver.extraJavaOptions": driver} if driver else {}
    if executors and jit:
        conf["spark.executor.extraJavaOptions"] = jit
    return conf


EVENT_LOG_FILE_SIZE = "128m"
"""Rolling event logs: a pipeline never ends, so one file per application would grow
without bound; the History Server compacts the rolled files."""


def observability(spec: PipelineSpec) -> dict[str, str]:
    """The UI (``spec.spark.ui``) and event logs (``spec.spark.eventLog``): the
    pipeline's own fields, so they win over ``spark.ui.enabled`` in ``spark.conf``."""
    conf: dict[str, str] = {}
    if spec.spark.ui.enabled:
        conf |= {"spark.ui.enabled": "true", "spark.ui.port": str(UI_PORT)}
    if spec.spark.event_log.dir:
        conf |= {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": spec.spark.event_log.dir,
            "spark.eventLog.rolling.enabled": "true",
            "spark.eventLog.rolling.maxFileSize": EVENT_LOG_FILE_SIZE,
        }
    return conf


TEMPLATE_FILE_KEY = "spark.kubernetes.executor.podTemplateFile"
TEMPLATE_FILE = "executor-pod-template.json"


def executor_template(env: Mapping[str, str], directory: Path | None = None) -> dict[str, str]:
    """Write the operator's executor pod template into ``directory`` (a new private
    temporary directory by default; JSON is YAML, as Spark's loader reads it) and return
    the setting naming it; nothing, and no directory, without a template."""
    template = env.get(names.EXECUTOR_POD_TEMPLATE)
    if not template:
        return {}
    path = (directory or Path(tempfile.mkdtemp(prefix="sluice-spark-"))) / TEMPLATE_FILE
    path.write_text(template)
    return {TEMPLATE_FILE_KEY: str(path)}


def ui_env(env: Mapping[str, str]) -> dict[str, str]:
    """Where Spark's UI listens, as the JVM's environment says it: Spark binds the UI
    to ``SPARK_LOCAL_IP``, or to every address without it (``spark.driver.bindAddress``
    does not apply to the UI). Loopback, unless the platform put it on the network."""
    if env.get(names.UI_ON_NETWORK) == "true":
        return {}
    return {"SPARK_LOCAL_IP": LOOPBACK}


def lower_own_thread(value: int) -> None:
    """Raise the niceness of the calling thread alone to ``value`` (Linux keeps one per
    thread, and a process inherits its forking thread's): the JVM that thread then
    launches runs, with every thread and process it starts, below the driver's other
    threads. Raising niceness needs no privilege; it cannot be undone, so only a
    thread of its own calls this. A thread already at least that nice is left so."""
    thread = threading.get_native_id()
    if value > os.getpriority(os.PRIO_PROCESS, thread):
        os.setpriority(os.PRIO_PROCESS, thread, value)


def session(conf: Mapping[str, str]) -> SparkSession:
    # PySpark picks the worker interpreter from the environment, not from the conf.
    os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    if conf.get("spark.ui.enabled") == "true":
        os.environ.update(ui_env(os.environ))
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def jvm_process(spark: SparkSession) -> subprocess.Popen[bytes] | None:
    """The process of the session's JVM, which PySpark launched (its gateway's);
    ``None`` for a JVM PySpark did not launch."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    process: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    return process


def class_archive_mapped(spark: SparkSession, archive: str | None) -> bool | None:
    """Whether the session's JVM maps ``archive`` (``None`` when there is none): the
    JVM ignores an archive that does not match it without a word, so the driver's
    log says whether it was used. Read from the JVM's memory map (Linux)."""
    if not archive:
        return None
    process = jvm_process(spark)
    if process is None:
        return False
    try:
        maps = Path(f"/proc/{process.pid}/maps").read_text()
    except OSError:
        return False
    return str(Path(archive).resolve()) in maps


def without_class_archive(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` without the driver JVM's class archive option (a pure function)."""
    key = "spark.driver.extraJavaOptions"
    kept = dict(conf)
    options = [o for o in conf.get(key, "").split() if not o.startswith(ARCHIVE_OPTION)]
    if options:
        kept[key] = " ".join(options)
    else:
        kept.pop(key, None)
    return kept


def _with_or_without_archive(conf: Mapping[str, str]) -> SparkSession:
    """The session; if its JVM did not start with the class archive, once more without
    it. The JVM ignores an archive that does not match it, but one cut short (a
    damaged file) crashes it at start, and a driver that cannot start at all is worse
    than a slow start."""
    try:
        return session(conf)
    except Exception as err:
        plain = without_class_archive(conf)
        if plain == dict(conf):
            raise
        logs.event(
            "spark's JVM did not start with the class archive: starting it without",
            level=logging.WARNING,
            archive=conf["spark.driver.extraJavaOptions"],
            error=str(err)[:500],
        )
        return session(plain)


class Launch:
    """The driver's SparkSession, started on a thread of its own so that its JVM's
    launch (seconds of CPU) overlaps the driver's connection to the checkpoint store
    and its schema check (round trips): a driver replacing a failed one claims
    sooner. The JVM is still launched before any gRPC client exists (``driver``)."""

    def __init__(self, conf: Mapping[str, str], nice: int = 0) -> None:
        self._future: Future[SparkSession] = Future()
        self.seconds: float | None = None
        """How long the session took to start, once it has."""
        began = time.monotonic()

        def start() -> None:
            try:
                lower_own_thread(nice)
                started = _with_or_without_archive(conf)
            except BaseException as err:  # raised to the driver by ``session()``
                self._future.set_exception(err)
                return
            self.seconds = time.monotonic() - began
            self._future.set_result(started)

        threading.Thread(target=start, name="spark-session", daemon=True).start()

    def session(self) -> SparkSession:
        """The session, once started; raises what its start raised."""
        return self._future.result()

    def discard(self) -> None:
        """The driver ends before it used the session (a stop, or a failure, during
        its start-up): a session that has started is stopped; one still starting is
        left, not waited for, so a stop during the JVM's launch ends the driver at
        once. That JVM exits with the driver's process: PySpark's gateway ends when
        its standard input, the driver's pipe, closes."""
        if not self._future.done() or self._future.exception() is not None:
            return
        try:
            self._future.result().stop()
        except Exception:  # Spark stops badly: the driver ends anyway
            return
