"""End-to-end helpers: job images whose pods run the real driver on the node agent,
``kubectl`` as a user runs it, a steady producer in the background, and the checks
a user makes afterwards (every record in the sink once, batches without overlap)."""

from __future__ import annotations

import bisect
import itertools
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cassandra import InvalidRequest

from sluice_dev.events import EventFactory
from sluice_dev.imagebuild import image_env_text
from sluice_dev.kubectl import Kubectl
from sluice_dev.nodeagent.podspec import IMAGE_ENV_FILE
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.produce import Background
from sluice_operator import naming
from tests.support import expected, state
from tests.support.agents import ISOLATION_TAINT, PrivateAgent
from tests.support.operator import Operators, Pipeline
from tests.support.waiting import wait_for

IMAGES_ROOT = REPO_ROOT / "tests" / "e2e" / "images"
JOB_IMAGE = "sluice-e2e/job"
ENTRYPOINT = "sluice_e2e:transform"


def job_images(workdir: Path, image_env: Mapping[str, str]) -> dict[str, Path]:
    """``sluice-e2e/job:v1``, ``:v2`` and ``:broken`` as code roots: their transform
    module and an ``image.env`` saying where the image keeps Spark's Kafka jars and
    class archive (``image_env``: the ``job_image_env`` fixture) and its driver's code
    (the code the test imports, :func:`job_code`); and
    ``:missing``, mapped to a directory that does not exist: the node agent cannot
    "pull" it (``ErrImagePull``, then ``ImagePullBackOff``)."""
    roots: dict[str, Path] = {}
    for version in ("v1", "v2", "broken"):
        root = workdir / "images" / version
        shutil.copytree(IMAGES_ROOT / version, root, dirs_exist_ok=True)
        paths = os.pathsep.join([str(root), *job_code()])
        env = {**image_env, "PYTHONPATH": paths}
        (root / IMAGE_ENV_FILE).write_text(image_env_text(env))
        roots[f"{JOB_IMAGE}:{version}"] = root
    roots[f"{JOB_IMAGE}:missing"] = workdir / "images" / "missing"
    return roots


def job_code() -> list[str]:
    """Where the test process imports the driver's code from, for the images to import
    the same: a worktree on ``PYTHONPATH`` beside a virtualenv installed from another
    checkout would otherwise run the other checkout's driver in the pods."""
    import sluice_api
    import sluice_job

    return [str(Path(m.__file__ or "").parents[1]) for m in (sluice_job, sluice_api)]


def manifest(
    name: str,
    namespace: str,
    *,
    image: str,
    bootstrap: str,
    topic: str,
    contact: str,
    keyspace: str,
    pool: str,
    toleration: str,
    executors: int = 0,
) -> dict[str, Any]:
    """A StreamingPipeline of the e2e job: one row per event into ``keyspace.events``;
    with ``executors``, that many executor pods, each on another node of the pool."""
    return {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": naming.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": image,
            "source": {
                "kafka": {
                    "bootstrapServers": bootstrap,
                    "topics": [topic],
                    "maxRecordsPerPartition": 2_000,
                }
            },
            "transform": {"entrypoint": ENTRYPOINT},
            "sink": {
                "cassandra": {"contactPoints": [contact], "keyspace": keyspace, "table": "events"}
            },
            "checkpoint": {"cassandra": {"contactPoints": [contact], "keyspace": keyspace}},
            "trigger": {"intervalSeconds": 1},
            "spark": {
                "driver": {
                    "cores": 1,
                    "memory": "768m",
                    "nodeSelector": {"sluice.dev/pool": pool},
                    "tolerations": [{"key": toleration, "operator": "Exists"}],
                },
                "executors": executor_settings(name, executors, pool, toleration),
            },
            "upgrade": {"stopTimeoutSeconds": 60},
            "failover": {"nodeLostSeconds": 5},
            "restart": {"backoffSeconds": 1, "maxBackoffSeconds": 4, "maxFailures": 10},
        },
    }


def executor_settings(pipeline: str, instances: int, pool: str, toleration: str) -> dict[str, Any]:
    """Executors in the test's pool, never two of the pipeline's on one node."""
    if instances == 0:
        return {"instances": 0}
    return {
        "instances": instances,
        "cores": 1,
        "memory": "512m",
        "nodeSelector": {"sluice.dev/pool": pool},
        "tolerations": [{"key": toleration, "operator": "Exists"}],
        "affinity": executors_apart(pipeline),
    }


def assert_executor_pod(pod: Any, pipeline: str, driver_pod: str, epoch: int) -> None:
    """``pod`` is an executor of ``pipeline``'s driver of ``epoch`` as a user sees it:
    named after both, owned by the driver pod (garbage-collected with it), the image's
    entrypoint with Spark's argument, confined, no token, and Spark's RPC secret by
    reference only (not readable from the pod spec)."""
    prefix = naming.executor_pod_prefix(pipeline, epoch)
    assert pod.metadata.name.startswith(f"{prefix}-exec-")
    [owner] = pod.metadata.owner_references
    assert (owner.kind, owner.name) == ("Pod", driver_pod)
    assert pod.metadata.labels[naming.LABEL_EPOCH] == str(epoch)
    assert pod.spec.containers[0].args == ["executor"]
    assert pod.spec.security_context.run_as_non_root is True
    assert pod.spec.containers[0].security_context.read_only_root_filesystem is True
    assert pod.spec.automount_service_account_token is False
    env = {e.name: e for e in pod.spec.containers[0].env}
    assert "_SPARK_AUTH_SECRET" not in env
    secret_ref = env["SLUICE_SPARK_AUTH_SECRET"].value_from.secret_key_ref
    assert secret_ref.name == naming.spark_auth_secret(pipeline)


def executors_apart(pipeline: str) -> dict[str, Any]:
    """Never two executor pods of ``pipeline`` on one node (the ``affinity`` of its
    ``spec.spark.executors``)."""
    mine = [
        {"key": naming.LABEL_PIPELINE, "operator": "In", "values": [pipeline]},
        {"key": naming.LABEL_ROLE, "operator": "In", "values": [naming.ROLE_EXECUTOR]},
    ]
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": mine},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }


@dataclass(frozen=True)
class SinkReport:
    records_in: int
    in_sink: int
    missing: int
    duplicates: int
    wrong: int
    """Rows whose content is not what the transform makes of their event."""


def sink_report(
    session: Any, keyspace: str, pipeline_id: str, factory: EventFactory, count: int
) -> SinkReport:
    """Compare the sink with the ``count`` events produced: every event once, with the
    right content; ``duplicates`` counts records covered by more than one committed
    batch (the sink's key would hide them, the checkpoint history does not)."""
    rows = state.events(session, keyspace)
    missing = wrong = 0
    for seq in range(count):
        want = expected.event_row(factory, seq)
        row = rows.get(want[0])
        if row is None:
            missing += 1
            continue
        action = want[3].upper() if row.tag == "v2" else want[3]
        got = (row.event_id, row.seq, row.page, row.action, row.user_id, row.event_time)
        if got != (*want[:3], action, *want[4:]):
            wrong += 1
    return SinkReport(count, len(rows), missing, overlaps(session, keyspace, pipeline_id), wrong)


def overlaps(session: Any, keyspace: str, pipeline_id: str) -> int:
    """Offsets covered by more than one committed batch, over all partitions."""
    seen: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for row in state.history(session, keyspace, pipeline_id):
        for topic, parts in json.loads(row.ranges).items():
            for partition, (start, end) in parts.items():
                seen.setdefault((topic, int(partition)), []).append((int(start), int(end)))
    total = 0
    for ranges in seen.values():
        ranges.sort()
        for (_, end), (start, _) in itertools.pairwise(ranges):
            total += max(0, end - start)
    return total


def batch_tags(session: Any, keyspace: str, pipeline_id: str) -> dict[str, str]:
    """Event id -> the code version of the committed batch whose ranges hold it."""
    owners: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for row in state.history(session, keyspace, pipeline_id):
        for topic, parts in json.loads(row.ranges).items():
            for partition, (start, end) in parts.items():
                owners.setdefault((topic, int(partition)), []).append(
                    (int(start), int(end), str(row.code_version))
                )
    for ranges in owners.values():
        ranges.sort()
    tags: dict[str, str] = {}
    for row in state.events(session, keyspace).values():
        ranges = owners.get((row.source_topic, row.source_partition), [])
        at = bisect.bisect_right(ranges, (row.source_offset, 2**63, "")) - 1
        if at >= 0 and ranges[at][0] <= row.source_offset < ranges[at][1]:
            tags[row.event_id] = ranges[at][2]
    return tags


RATE = 150.0
"""Events per second while the faults happen (a steady stream, not a backlog)."""
UNTIL_STOPPED = 1_000_000
"""A count no test reaches: the events are produced at ``RATE`` until the test's faults
are over and it stops the producer (:meth:`Setup.stop_and_drain`), so a test waits on
its faults, not on a fixed quantity of events, and no fault can outlast production."""


@dataclass
class Setup:
    layout: Layout
    kubectl: Kubectl
    operators: Operators
    pipeline: Pipeline
    agents: list[PrivateAgent]
    pool: str
    bootstrap: str
    topic: str
    contact: str
    keyspace: str
    cassandra: Any

    @property
    def pipeline_id(self) -> str:
        return self.pipeline.checkpoint_key

    def manifest(self, version: str, executors: int = 0) -> dict[str, Any]:
        return manifest(
            self.pipeline.name,
            self.pipeline.namespace,
            image=f"{JOB_IMAGE}:{version}",
            bootstrap=self.bootstrap,
            topic=self.topic,
            contact=self.contact,
            keyspace=self.keyspace,
            pool=self.pool,
            toleration=ISOLATION_TAINT,
            executors=executors,
        )

    def produce(self, count: int, factory: EventFactory) -> Background:
        return Background(self.bootstrap, self.topic, count, RATE, factory).start()

    def wait_commit_by(self, epoch: int, timeout: float = 180) -> None:
        """Until a batch committed by the driver of ``epoch`` is in the history."""
        wait_for(
            lambda: any(
                row.epoch == epoch
                for row in state.history(self.cassandra, self.keyspace, self.pipeline_id)
            ),
            timeout=timeout,
            what=f"a batch committed by epoch {epoch}",
            ignoring=(InvalidRequest,),  # the driver has not created its tables yet
        )

    def drained(self, production: Background, timeout: float = 240) -> None:
        """Production ended and the checkpoint holds Kafka's end offsets."""
        production.wait(timeout)
        ends = state.end_offsets(self.bootstrap, self.topic, 4)
        wait_for(
            lambda: state.committed(self.cassandra, self.keyspace, self.pipeline_id) == ends,
            timeout=timeout,
            what=f"the pipeline to commit the topic's end offsets {ends}",
        )

    def stop_and_drain(self, production: Background, timeout: float = 240) -> int:
        """The faults are over: stop producing, wait until the checkpoint holds Kafka's
        end offsets, and return how many events were produced (``0 .. n-1``, once)."""
        production.stop()
        self.drained(production, timeout)
        return production.produced

    def zombie_batches(self, zombie: int, successor: int) -> tuple[list[int], int]:
        """:func:`state.zombie_batches` of the test's pipeline."""
        return state.zombie_batches(
            self.cassandra, self.keyspace, self.pipeline_id, zombie, successor
        )

    def driver_pid(self) -> tuple[Any, int]:
        (pod,) = [p for p in self.pipeline.live_pods() if p.status.phase == "Running"]
        container = pod.status.container_statuses[0]
        return pod, int(container.container_id.split("//")[1])
