"""Pipelines through secure servers (issue 14 item 5): the real driver reads Kafka's
SASL_SSL listener as a SCRAM user, or its SSL listener with a client certificate,
writes dead letters, and keeps its sink and checkpoint in the ``cassandra-secure``
node (TLS required, password authentication, permissions enforced).

What a user checks: the sink and the dead-letter topic are exact, passwords with
quotes and backslashes work, a refused Cassandra login is waited out as an outage
and the pipeline goes on by itself once the role exists, and no secret
value appears in the driver's log, its termination message or its metrics."""

from __future__ import annotations

import secrets
import signal
from collections.abc import Callable
from typing import Any

import pytest

from sluice_api import metrics as metric_names
from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import expected, state
from tests.support.agents import free_port
from tests.support.driver import Driver, DriverRun, spec
from tests.support.scrape import scrape
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PARTITIONS = 2
RECORDS = 600
TRANSFORM = "sluice_job.examples.events:transform"


def awkward(prefix: str) -> str:
    """A password a naive quoting would break: double and single quote, backslash."""
    return f"{prefix}\"\\'{secrets.token_hex(6)}"


def cassandra_with_tls(contact: str, keyspace: str, tls: dict[str, Any]) -> dict[str, Any]:
    secured = {"credentialsSecret": "cassandra-login", "tls": tls}
    return {
        "sink": {
            "cassandra": {"contactPoints": [contact], "keyspace": keyspace, "table": "events"}
            | secured
        },
        "checkpoint": {"cassandra": {"contactPoints": [contact], "keyspace": keyspace} | secured},
    }


def cassandra_env(
    user: str, password: str, ca: str, cert: str = "", key: str = ""
) -> dict[str, str]:
    env = {}
    for prefix in ("SLUICE_SINK_CASSANDRA", "SLUICE_CHECKPOINT_CASSANDRA"):
        env |= {f"{prefix}_USERNAME": user, f"{prefix}_PASSWORD": password, f"{prefix}_CA": ca}
        if cert:
            env |= {f"{prefix}_CERT": cert, f"{prefix}_KEY": key}
    return env


def test_sasl_ssl_kafka_and_tls_cassandra_with_awkward_passwords_exact_and_nothing_leaks(
    kafka_bootstrap: str,
    kafka_topic: Any,
    kafka_secure: Any,
    cassandra_secure: Any,
    secure_events_keyspace: str,
    driver: Driver,
    unique_name: Callable[[str], str],
) -> None:
    factory = EventFactory(seed=31, bad_every=20)
    topic, dead_letters = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, RECORDS, factory=factory)
    kafka_user, kafka_password = unique_name("k")[:40], awkward("k")
    kafka_secure.add_scram_user(kafka_user, kafka_password, "SCRAM-SHA-512")
    role, role_password = unique_name("r").replace("-", "_")[:40], awkward("c")
    # The role does not exist yet: the driver's login is refused, and it must wait.
    port = free_port()
    env = {
        "SLUICE_KAFKA_USERNAME": kafka_user,
        "SLUICE_KAFKA_PASSWORD": kafka_password,
        "SLUICE_KAFKA_CA": kafka_secure.ca_pem,
        "SLUICE_METRICS_PORT": str(port),
        "POD_IP": "127.0.0.1",
        **cassandra_env(role, role_password, cassandra_secure.ca_pem),
    }
    pipeline = spec(
        bootstrap=kafka_secure.sasl_ssl_bootstrap,
        topic=topic,
        contact=cassandra_secure.contact,
        keyspace=secure_events_keyspace,
        entrypoint=TRANSFORM,
        cap=200,
        deadLetter={"kafka": {"topic": dead_letters}},
    )
    pipeline["source"]["kafka"]["security"] = {
        "protocol": "SASL_SSL",
        "sasl": {"mechanism": "SCRAM-SHA-512", "credentialsSecret": "kafka-login"},
        "tls": {"caSecret": "kafka-ca"},
    }
    pipeline |= cassandra_with_tls(
        cassandra_secure.contact, secure_events_keyspace, {"caSecret": "ca"}
    )
    run = driver.start(pipeline, epoch=1, env=env)

    outage = run.wait_event(
        lambda e: e.get("event") == "dependency unavailable" and e.get("dependency") == "cassandra",
        timeout=180,
        what="the driver to report the refused Cassandra login as an outage",
    )
    assert "authenticat" in outage["message"].lower()
    cassandra_secure.create_role(
        role, role_password, secure_events_keyspace, ("SELECT", "MODIFY", "CREATE")
    )
    pipeline_id = driver.checkpoint_key
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: (
            state.committed(cassandra_secure.admin, secure_events_keyspace, pipeline_id) == ends
        ),
        timeout=300,
        what="the driver to commit the topic's end offsets through SASL_SSL and TLS",
    )
    metrics_text = _metrics_text(port)
    seen = scrape(port)
    assert seen.value(metric_names.DEPENDENCY_AVAILABLE, dependency="cassandra") == 1.0
    assert (
        seen.value(metric_names.DEPENDENCY_RETRIES + "_total", dependency="cassandra") or 0
    ) >= 1
    run.kill(signal.SIGTERM)
    assert run.wait(120) == 0

    _assert_exact(
        kafka_bootstrap, topic, dead_letters, factory, cassandra_secure, secure_events_keyspace
    )
    _assert_no_secret(run, metrics_text, (kafka_password, role_password))


def test_client_certificates_and_dead_letters_with_their_own_user_on_other_brokers(
    kafka_bootstrap: str,
    kafka_topic: Any,
    kafka_secure: Any,
    cassandra_secure: Any,
    secure_events_keyspace: str,
    driver: Driver,
    unique_name: Callable[[str], str],
) -> None:
    factory = EventFactory(seed=32, bad_every=20)
    topic, dead_letters = kafka_topic(partitions=PARTITIONS), kafka_topic(partitions=1)
    produce(kafka_bootstrap, topic, RECORDS, factory=factory)
    dlq_user, dlq_password = unique_name("d")[:40], awkward("d")
    kafka_secure.add_scram_user(dlq_user, dlq_password, "SCRAM-SHA-256")
    role, role_password = unique_name("r").replace("-", "_")[:40], awkward("c")
    cassandra_secure.create_role(
        role, role_password, secure_events_keyspace, ("SELECT", "MODIFY", "CREATE")
    )
    env = {
        # The source: the SSL listener, which requires the client certificate.
        "SLUICE_KAFKA_CA": kafka_secure.ca_pem,
        "SLUICE_KAFKA_CERT": kafka_secure.client_cert_pem,
        "SLUICE_KAFKA_KEY": kafka_secure.client_key_pem,
        # The dead letters: the SASL_SSL listener, as their own SCRAM-SHA-256 user.
        "SLUICE_DLQ_KAFKA_USERNAME": dlq_user,
        "SLUICE_DLQ_KAFKA_PASSWORD": dlq_password,
        "SLUICE_DLQ_KAFKA_CA": kafka_secure.ca_pem,
        **cassandra_env(
            role,
            role_password,
            cassandra_secure.ca_pem,
            cassandra_secure.client_cert_pem,
            cassandra_secure.client_key_pem,
        ),
    }
    pipeline = spec(
        bootstrap=kafka_secure.ssl_bootstrap,
        topic=topic,
        contact=cassandra_secure.contact,
        keyspace=secure_events_keyspace,
        entrypoint=TRANSFORM,
        cap=200,
        deadLetter={
            "kafka": {
                "topic": dead_letters,
                "bootstrapServers": kafka_secure.sasl_ssl_bootstrap,
                "security": {
                    "protocol": "SASL_SSL",
                    "sasl": {"mechanism": "SCRAM-SHA-256", "credentialsSecret": "dlq-login"},
                    "tls": {"caSecret": "kafka-ca"},
                },
            }
        },
    )
    pipeline["source"]["kafka"]["security"] = {
        "protocol": "SSL",
        "tls": {"caSecret": "kafka-ca", "clientSecret": "kafka-client"},
    }
    pipeline |= cassandra_with_tls(
        cassandra_secure.contact,
        secure_events_keyspace,
        {"caSecret": "ca", "clientSecret": "client"},
    )
    run = driver.start(pipeline, epoch=1, env=env)
    pipeline_id = driver.checkpoint_key
    ends = state.end_offsets(kafka_bootstrap, topic, PARTITIONS)
    wait_for(
        lambda: (
            _committed_or_exited(run, cassandra_secure.admin, secure_events_keyspace, pipeline_id)
            == ends
        ),
        timeout=300,
        what="the driver to commit the topic's end offsets with client certificates",
    )
    run.kill(signal.SIGTERM)
    assert run.wait(120) == 0
    _assert_exact(
        kafka_bootstrap, topic, dead_letters, factory, cassandra_secure, secure_events_keyspace
    )
    keys = (kafka_secure.client_key_pem, cassandra_secure.client_key_pem)
    _assert_no_secret(run, "", (dlq_password, role_password, *map(_key_body, keys)))


def _committed_or_exited(run: DriverRun, session: Any, keyspace: str, pipeline: str) -> Any:
    if run.proc.poll() is not None:
        raise AssertionError(
            f"driver exited {run.proc.returncode}:\n{run.log.read_text(errors='replace')[-3000:]}"
        )
    return state.committed(session, keyspace, pipeline)


def _assert_exact(
    bootstrap: str,
    topic: str,
    dead_letters: str,
    factory: EventFactory,
    cassandra_secure: Any,
    keyspace: str,
) -> None:
    source = {(r.partition, r.offset): r for r in state.read_topic(bootstrap, topic)}
    bad = {at for at, r in source.items() if expected.reject_reason(r.value) is not None}
    assert len(bad) == RECORDS // 20
    letters = state.read_topic(bootstrap, dead_letters)
    positions = sorted(
        (int(m.headers["sluice.source.partition"]), int(m.headers["sluice.source.offset"]))
        for m in letters
    )
    assert positions == sorted(bad)
    rows = state.events(cassandra_secure.admin, keyspace)
    good = [seq for seq in range(RECORDS) if not factory.is_bad(seq)]
    assert sorted(rows) == sorted(f"e-{factory.seed}-{seq}" for seq in good)
    for seq in good:
        row = rows[f"e-{factory.seed}-{seq}"]
        assert (row.event_id, row.seq, row.page, row.action, row.user_id, row.event_time) == (
            expected.event_row(factory, seq)
        )


def _metrics_text(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def _key_body(pem: str) -> str:
    """A line from the middle of a PEM key: what a leak of the key would contain."""
    lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    return lines[len(lines) // 2]


def _assert_no_secret(run: DriverRun, metrics_text: str, values: tuple[str, ...]) -> None:
    places = {
        "driver log": run.log.read_text(errors="replace"),
        "termination message": run.termination.read_text(),
        "metrics": metrics_text,
    }
    for value in values:
        for where, text in places.items():
            assert value not in text, f"a secret value appears in the {where}"
