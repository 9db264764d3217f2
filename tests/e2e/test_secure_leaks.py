"""A pipeline with secure connections, run by the operator, leaks no secret (issue 14
item 5): Kafka's SASL_SSL listener as a SCRAM user, the ``cassandra-secure`` node with
a password and TLS, every secret in a labelled Secret. After it has run and been
suspended (a clean stop: the driver writes its termination message, the operator
copies it into the status), no secret value is in any log file of the run (operator,
node agent, driver container), any Event, the pipeline's status or the pod objects.

Runs on the node agent, in ``make test`` (CI's hour; see ``test_pipeline``). On real
nodes, with the credentials resolved by a kubelet and the log served by it:
``test_real_node_secure`` (``make test-node``).
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.produce import produce
from tests.support import state
from tests.support.agents import ISOLATION_TAINT, private_agent
from tests.support.e2e import JOB_IMAGE, job_images, manifest
from tests.support.operator import Operators, Pipeline
from tests.support.secure import grant_pipeline, secured
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

RECORDS = 400


def test_secrets_reach_the_driver_and_nothing_else(
    agent_stack: Layout,
    core: Any,
    operators: Operators,
    pipeline: Pipeline,
    kafka_bootstrap: str,
    kafka_topic: Any,
    kafka_secure: Any,
    cassandra_secure: Any,
    secure_events_keyspace: str,
    job_image_env: dict[str, str],
    tmp_path: Path,
) -> None:
    kafka_password, role_password = _awkward(), _awkward()
    namespace = pipeline.namespace
    grant_pipeline(
        core,
        namespace,
        kafka_secure,
        cassandra_secure,
        secure_events_keyspace,
        name=f"leak_{uuid.uuid4().hex[:8]}",
        passwords=(kafka_password, role_password),
    )
    topic = kafka_topic(partitions=2)
    factory = EventFactory(seed=71)
    produce(kafka_bootstrap, topic, RECORDS, factory=factory)

    pool = f"pool-{uuid.uuid4().hex[:6]}"
    with ExitStack() as stack:
        for _ in range(2):
            stack.enter_context(
                private_agent(
                    agent_stack,
                    core,
                    tmp_path,
                    labels={"sluice.dev/pool": pool},
                    images=job_images(tmp_path, job_image_env),
                )
            )
        spec = secured(
            manifest(
                pipeline.name,
                namespace,
                image=f"{JOB_IMAGE}:v1",
                bootstrap=kafka_secure.sasl_ssl_bootstrap,
                topic=topic,
                contact=cassandra_secure.contact,
                keyspace=secure_events_keyspace,
                pool=pool,
                toleration=ISOLATION_TAINT,
            )["spec"]
        )
        operators.start()
        pipeline.create(spec)
        pipeline.wait_phase("Running", epoch=1, timeout=180)
        pipeline_id = pipeline.checkpoint_key
        ends = state.end_offsets(kafka_bootstrap, topic, 2)
        wait_for(
            lambda: (
                state.committed(cassandra_secure.admin, secure_events_keyspace, pipeline_id) == ends
            ),
            timeout=240,
            what="the operator's driver to commit the topic's end offsets through SASL_SSL/TLS",
        )
        assert len(state.events(cassandra_secure.admin, secure_events_keyspace)) == RECORDS
        pods = [pod.to_dict() for pod in pipeline.pods()]
        pipeline.patch_spec({"suspend": True})
        pipeline.wait_phase("Suspended", timeout=180)
        status = pipeline.status()
        events = [e.to_dict() for e in core.list_namespaced_event(namespace).items]

    places = {
        "status": json.dumps(status),
        "events": json.dumps(events, default=str),
        "pods": json.dumps(pods, default=str),
        **{
            str(log.relative_to(tmp_path)): log.read_text(errors="replace")
            for log in _logs(tmp_path)
        },
    }
    # The driver's own log is among them (its batch lines), not only the operator's.
    assert any(re.search(r'"event":\s*"batch"', text) for text in places.values()), sorted(places)
    for value in (kafka_password, role_password):
        leaked = [where for where, text in places.items() if value in text]
        assert leaked == [], "a secret value appears in: " + ", ".join(leaked)
    assert status.get("phase") == "Suspended"


def _awkward() -> str:
    return f"pw\"\\'{secrets.token_hex(8)}"


def _logs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.log") if p.is_file())
