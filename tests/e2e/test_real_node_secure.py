"""Secure connections from a pod on a real node (issue 37): the job image's driver,
in a container under the pinned kubelet, reads Kafka's ``SASL_SSL`` listener as a
SCRAM user and writes and checkpoints to the ``cassandra-secure`` node with a
password and TLS, every secret in a labelled Secret.

What the node agent could not show: the Secrets reach the driver as a kubelet
resolves them (``secretKeyRef`` environment variables), the driver writes the CAs it
trusts to files on a read-only root filesystem as uid 185, and the JVM and the Python
clients inside the image speak TLS to the stack's servers across the pod network. And
no secret value reaches the container's log (as ``kubectl logs`` serves it, through
the kubelet), the pod objects or the pipeline's status.
Needs ``SLUICE_NETNS=1`` (``make test-node``).
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from sluice_dev.realnode import plan
from tests.support import state
from tests.support.fixtures import REAL_JOB_IMAGE
from tests.support.operator import Operators, Pipeline
from tests.support.real_images import (
    PARTITIONS,
    PLACEMENT_POLICY,
    RealPlace,
    enforce_restricted,
    on_pod_network,
)
from tests.support.secure import PIPELINE_SECRETS, grant_pipeline, secured
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(900)]

RECORDS = 1_200


def test_a_driver_on_a_real_node_reads_sasl_ssl_and_writes_cassandra_over_tls(
    real_workers: tuple[plan.Worker, ...],
    core: Any,
    operators: Operators,
    pipeline: Pipeline,
    kafka_bootstrap: str,
    kafka_topic: Any,
    kafka_secure: Any,
    cassandra_secure: Any,
    secure_events_keyspace: str,
) -> None:
    kafka_password, role_password = secrets.token_hex(12), secrets.token_hex(12)
    namespace = pipeline.namespace
    enforce_restricted(core, namespace)
    grant_pipeline(
        core,
        namespace,
        kafka_secure,
        cassandra_secure,
        secure_events_keyspace,
        name=f"real_{uuid.uuid4().hex[:8]}",
        passwords=(kafka_password, role_password),
    )
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=37))
    place = RealPlace(
        kafka_secure.sasl_ssl_bootstrap, topic, cassandra_secure.contact, secure_events_keyspace
    )
    spec = secured(place.spec(REAL_JOB_IMAGE, "sluice_job.examples.events:transform", cap=500))

    operators.start(PLACEMENT_POLICY)
    applied = time.monotonic()
    pipeline.create(spec)
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == RECORDS
    wait_for(
        lambda: (
            state.committed(cassandra_secure.admin, secure_events_keyspace, pipeline.checkpoint_key)
            == ends
        ),
        timeout=400,
        what="the driver in its container to commit the topic's end offsets over SASL_SSL/TLS",
    )
    print(f"\napply -> end offsets committed over SASL_SSL/TLS {time.monotonic() - applied:.1f}s")
    assert len(state.events(cassandra_secure.admin, secure_events_keyspace)) == RECORDS

    (pod,) = [p for p in pipeline.pods() if p.status.phase == "Running"]
    assert on_pod_network(real_workers, pod), "the driver runs on a real worker"
    (driver,) = [c for c in pod.spec.containers if c.name == "driver"]
    referenced = {
        e.value_from.secret_key_ref.name
        for e in driver.env or ()
        if e.value_from is not None and e.value_from.secret_key_ref is not None
    }
    assert set(PIPELINE_SECRETS) <= referenced
    log = core.read_namespaced_pod_log(pod.metadata.name, namespace)  # through the kubelet
    assert '"event": "batch"' in log, "the log kubectl serves is the driver's"
    places = {
        "the driver's log": log,
        "the pod": json.dumps(pod.to_dict(), default=str),
        "the status": json.dumps(pipeline.status()),
    }
    for value in (kafka_password, role_password):
        leaked = [where for where, text in places.items() if value in text]
        assert leaked == [], "a secret value appears in: " + ", ".join(leaked)
