"""``python -m bench.cold_start``: a cold driver's JVM with and without the class
archive (``sluice_job.class_archive``), in the same run, alternating.

What a driver that replaces a failed one (no hot standby) pays before its first
commit, apart from its pod: the SparkSession's start and a first batch in a fresh
JVM. Each run is a fresh process configured as the soak's driver (``local[1]``, 768 MiB,
the driver's own Spark settings): it starts the session, then runs two batches of the
events example over ``--records`` records of a 6-partition topic (the Kafka read by
exact ranges, the transform, the write's Spark job with the Cassandra sink's executor
side, as a dry run that binds and groups the rows and sends nothing, and the rejects
counted), and reports how long each took and the JVM's resident memory. ``--runs``
pairs (3), each pair without then with the archive; medians are printed and written
to ``bench/results/<stamp>-cold-start.json`` and ``.md``. Measurements, not
assertions: only meaningful on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from bench import fixtures
from bench.files import write
from bench.fixtures import BOOTSTRAP, CONTACT, Names, Topics
from bench.settings import RESULTS
from sluice_api import env as names
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.servers import spark as spark_artifact

PARTITIONS: Final = 6
MODES: Final = ("without", "with")
FIGURES: Final = ("session_s", "first_batch_s", "second_batch_s", "rss_mib")


def say(line: str) -> None:
    print(f"[bench-cold-start {datetime.now():%H:%M:%S}] {line}", flush=True)


def child(topic: str, keyspace: str, records: int) -> dict[str, Any]:
    """One fresh JVM's figures (run in a process of its own, see :func:`main`)."""
    began = time.perf_counter()
    from sluice_api.spec import PipelineSpec
    from sluice_job import reader, spark
    from sluice_job.checkpoint import Batch
    from sluice_job.examples import events
    from sluice_job.execute import KafkaRecords, SparkExecutor
    from sluice_job.offsets import OffsetRange, TopicPartition
    from sluice_job.sinks.cassandra import CassandraSink, CassandraTarget

    spec = PipelineSpec.model_validate(
        {
            "image": "bench/cold-start",
            "source": {"kafka": {"bootstrapServers": BOOTSTRAP, "topics": [topic]}},
            "transform": {"entrypoint": "sluice_job.examples.events:transform"},
            "sink": {"cassandra": {"contactPoints": [CONTACT], "keyspace": keyspace, "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": [CONTACT], "keyspace": keyspace}},
            "spark": {"driver": {"cores": 1, "memory": "768m"}, "executors": {"instances": 0}},
        }
    )
    conf = spark.spark_conf(spec, os.environ, "bench-cold-start", sys.executable)
    session = spark.session(conf)
    started = time.perf_counter()
    sink = CassandraSink(CassandraTarget((CONTACT,), keyspace, "t", None))

    class DrySink:
        def write(self, frame: Any, version: int, *, dry: bool = False) -> int | None:
            del dry  # always dry: nothing is sent
            return sink.write(frame, version, dry=True)

    client = reader.client_config({"bootstrap.servers": BOOTSTRAP}, f"bench-{topic}")
    executor = SparkExecutor(
        KafkaRecords(session, client),
        events.transform,
        {},
        DrySink(),
        _CountedLetters(),
        _NoMarks(),
    )
    half = records // PARTITIONS // 2
    laps = []
    for n in range(2):
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ranges = tuple(OffsetRange(tp, n * half, (n + 1) * half) for tp in tps)
        batch = Batch(n + 1, ranges, {r.tp: r.end for r in ranges}, version=1)
        lap = time.perf_counter()
        executor.execute(batch, epoch=1)
        laps.append(time.perf_counter() - lap)
    mapped = spark.class_archive_mapped(session, os.environ.get(names.SPARK_CLASS_ARCHIVE))
    jvm = spark.jvm_process(session)
    if jvm is None:
        raise RuntimeError("Spark's JVM was not launched by this process")
    status = Path(f"/proc/{jvm.pid}/status").read_text().splitlines()
    rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    session.stop()
    return {
        "session_s": round(started - began, 3),
        "first_batch_s": round(laps[0], 3),
        "second_batch_s": round(laps[1], 3),
        "rss_mib": round(rss / 1024),
        "class_archive": mapped,
    }


class _CountedLetters:
    """A dead-letter destination that takes the rejects and sends nothing."""

    refuses: bool = False
    payload_budget: int = 1_000_000

    def write(self, rejects: Any, *, batch_id: int, count: int) -> None:
        del batch_id, count
        for _ in rejects:
            pass


class _NoMarks:
    """The checkpoint store's dead-letter marks, for a bench with no checkpoint: the
    driver always holds the pipeline, and nothing is recorded."""

    def letters_durable(self, batch: Any) -> None:
        return None

    def still_held(self, batch: Any) -> None:
        return None


def _one(env: Mapping[str, str], topic: str, keyspace: str, records: int) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.cold_start", "--child", topic, keyspace, str(records)]
    done = subprocess.run(argv, env=dict(env), capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"a cold start failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def report(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """The Markdown table of medians (min-max) per mode (a pure function)."""
    lines = ["| | without the archive | with it |", "|---|---|---|"]
    for figure in FIGURES:
        cells = []
        for mode in MODES:
            values = [float(r[figure]) for r in runs[mode]]
            cells.append(f"{statistics.median(values):g} ({min(values):g}-{max(values):g})")
        lines.append(f"| {figure} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start")
    parser.add_argument("--runs", type=int, default=3, help="pairs of cold starts")
    parser.add_argument("--records", type=int, default=1200, help="records of both batches")
    parser.add_argument("--child", nargs=3, metavar=("TOPIC", "KEYSPACE", "RECORDS"))
    args = parser.parse_args(argv)
    if args.child:
        topic, keyspace, records = args.child
        print(json.dumps(child(topic, keyspace, int(records))), flush=True)
        return 0
    layout = Layout.from_env()
    fixtures.ensure_stack(layout, say)
    image = spark_artifact.job_image_env(layout)
    stamp = Names.fresh()
    topics = Topics(BOOTSTRAP)
    topic = topics.create(stamp.topic("cold"), PARTITIONS)
    # Twice the records read: events spread over the partitions by key, and each batch
    # reads the same number from every partition.
    produce(BOOTSTRAP, topic, 2 * args.records, factory=EventFactory(seed=fixtures.BACKLOG_SEED))
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with fixtures.cassandra_session(CONTACT) as session:
        fixtures.create_keyspace(session, stamp.keyspace, ["t"])
        try:
            for n in range(args.runs):
                for mode in MODES:
                    env = {**os.environ, **image}
                    if mode == "without":
                        del env[names.SPARK_CLASS_ARCHIVE]
                    figures = _one(env, topic, stamp.keyspace, args.records)
                    runs[mode].append(figures)
                    say(f"run {n + 1} {mode} the archive: {json.dumps(figures)}")
        finally:
            fixtures.drop_keyspace(session, stamp.keyspace)
            topics.delete_all()
    table = report(runs)
    print(table)
    doc = {"stamp": f"{stamp.stamp}-cold-start", "records": args.records, "runs": runs}
    data, text = write(doc, table, RESULTS)
    say(f"wrote {data} and {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
