"""The e2e suite runs against the local stack: its fixtures come from
``tests/support/fixtures.py``, and ``setup``: two private nodes in a pool of the
test's own, the job images, a topic and the events table (see ``Setup``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import Layout
from tests.support import agents as private_nodes
from tests.support.e2e import Setup, job_images
from tests.support.fixtures import *  # noqa: F403
from tests.support.operator import Operators, Pipeline
from tests.support.real_images import PARTITIONS, PLACEMENT_POLICY, RealPlace, enforce_restricted
from tests.support.transforms import EVENTS_TABLE
from tests.support.waiting import wait_for


@pytest.fixture
def setup(
    agent_stack: Layout,
    core: Any,
    operators: Operators,
    pipeline: Pipeline,
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    job_image_env: dict[str, str],
    tmp_path: Path,
) -> Iterator[Setup]:
    pool = f"pool-{uuid.uuid4().hex[:6]}"
    images = job_images(tmp_path, job_image_env)
    with ExitStack() as stack:
        agents = [
            stack.enter_context(
                private_nodes.private_agent(
                    agent_stack, core, tmp_path, labels={"sluice.dev/pool": pool}, images=images
                )
            )
            for _ in range(2)
        ]
        yield Setup(
            layout=agent_stack,
            kubectl=Kubectl(agent_stack),
            operators=operators,
            pipeline=pipeline,
            agents=agents,
            pool=pool,
            bootstrap=kafka_bootstrap,
            topic=kafka_topic(partitions=4),
            contact=cassandra_contact,
            keyspace=events_table,
            cassandra=cassandra,
        )
        _delete_and_wait(pipeline)


def _delete_and_wait(pipeline: Pipeline) -> None:
    """Delete the pipeline while the operator still runs: its driver stops cleanly."""
    if pipeline.get() is None:
        return
    pipeline.delete()
    wait_for(lambda: pipeline.get() is None, timeout=120, what="the pipeline to be deleted")


@pytest.fixture
def real_sink(
    real_workers: tuple[Any, ...],
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra: Any,
    cassandra_contact: str,
    cassandra_keyspace: str,
    core: Any,
    namespace: str,
) -> RealPlace:
    """For a pipeline on real nodes: the workers Ready with the job image, a fresh
    topic and the events table, and the test's namespace under Pod Security
    ``restricted``."""
    enforce_restricted(core, namespace)
    topic = kafka_topic(partitions=PARTITIONS)
    cassandra.execute(EVENTS_TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    return RealPlace(kafka_bootstrap, topic, cassandra_contact, cassandra_keyspace)


@pytest.fixture
def real_place(real_sink: RealPlace, operators: Operators) -> RealPlace:
    """:func:`real_sink`, and the test's operator (a process of the stack) allowed to
    place drivers on the workers (``PLACEMENT_POLICY``)."""
    operators.start(PLACEMENT_POLICY)
    return real_sink
