"""End to end, a user's own code: ``examples/custom-transform`` is built into an image
with ``sluice-dev image build`` (as its README says), and a pipeline naming that image
and the example's entrypoint runs through the operator on the stack's node agent.
The transform's package exists nowhere else: not in the repository's import paths,
not in the virtualenv, only in the built image's directory. The pipeline runs
two executor pods of that image, so the user's code runs in Spark's executors too.
The sink then holds exactly the rows the example's documented rules make of the
events, and the dead-letter topic exactly the malformed records, with their reasons.

Runs on the node agent, in ``make test`` (CI's hour; see ``test_pipeline``). On real
nodes, the example's own Dockerfile built FROM the job image and its executors run by
kubelets: ``test_real_node_custom_image`` (``make test-node``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev.events import EventFactory
from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from sluice_dev.servers import nodeagent
from tests.support import clickscore, state
from tests.support.operator import Operators, Pipeline
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

IMAGE = "sluice-e2e/clickscore:test"
PARTITIONS = 4
EXECUTORS = 2


@pytest.fixture
def cleanup(pipeline: Pipeline) -> Iterator[None]:
    """Delete the pipeline while the operator still runs: its driver stops cleanly."""
    yield
    if pipeline.get() is not None:
        pipeline.delete()
        wait_for(lambda: pipeline.get() is None, timeout=120, what="the pipeline to be deleted")


def test_a_transform_that_lives_only_in_the_example_package_runs_from_its_built_image(
    agent_stack: Layout,
    operators: Operators,
    pipeline: Pipeline,
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    cassandra_keyspace: str,
    driver_cluster_role: str,
    cleanup: None,
) -> None:
    assert importlib.util.find_spec("clickscore") is None, "the example must not be importable"
    root = _build_image(agent_stack)
    assert sorted(p.name for p in root.iterdir()) == [
        "clickscore",
        "clickscore-0.1.0.dist-info",
        "image.env",
    ], "the image adds the user's package alone; the job code comes from the job image"

    topic, dead_letters = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    clickscore.create_sink_table(cassandra, cassandra_keyspace)
    operators.start()
    body = clickscore.localized(
        name=pipeline.name,
        namespace=pipeline.namespace,
        image=IMAGE,
        bootstrap=kafka_bootstrap,
        topic=topic,
        dead_letters=dead_letters,
        contact=cassandra_contact,
        keyspace=cassandra_keyspace,
        executors=EXECUTORS,
    )
    Kubectl(agent_stack).apply(body)
    factory, count = EventFactory(seed=71, bad_every=10), 3_000
    produce(kafka_bootstrap, topic, count, factory=factory)
    status = pipeline.wait_phase("Running", epoch=1, timeout=180)
    assert status["image"] == IMAGE
    executors = wait_for(
        lambda: pipeline.running_executors(EXECUTORS),
        timeout=180,
        what=f"{EXECUTORS} executor pods of {IMAGE}",
    )
    assert {pod.spec.containers[0].image for pod in executors} == {IMAGE}

    pipeline_id = pipeline.checkpoint_key
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: state.committed(cassandra, cassandra_keyspace, pipeline_id) == ends,
        timeout=300,
        what=f"the pipeline to commit the topic's end offsets {ends}",
        ignoring=(InvalidRequest,),  # the driver has not created its tables yet
    )

    assert clickscore.sink(cassandra, cassandra_keyspace) == clickscore.expected_sink(
        factory, count, clickscore.weights()
    )
    letters = clickscore.letters(state.read_topic(kafka_bootstrap, dead_letters))
    assert letters == clickscore.expected_letters(factory, count)
    history = state.history(cassandra, cassandra_keyspace, pipeline_id)
    assert {row.code_version for row in history} == {IMAGE}
    print(
        f"\n{count - len(letters)} scored rows and {len(letters)} dead letters by {IMAGE} ({root})"
    )


def _build_image(layout: Layout) -> Path:
    """``sluice-dev image build`` as the user runs it; the directory it registered."""
    env = {**os.environ, "SLUICE_STACK_DIR": str(layout.stack), "SLUICE_CACHE": str(layout.cache)}
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "sluice_dev",
            "image",
            "build",
            str(clickscore.EXAMPLE),
            "--tag",
            IMAGE,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"built {IMAGE}: clickscore in " in built.stdout
    return Path(json.loads(nodeagent.images_file(layout).read_text())[IMAGE])
