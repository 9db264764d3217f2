"""A short chaos soak (``sluice_dev.soak``, the harness of ``make soak``) in the e2e
suite: the real operator and driver pods on the stack's node agent, a transactional
producer aborting 10 % of its transactions over a 6-partition topic, 5 % malformed
events, and one fault of each of three kinds while events flow: the driver process
SIGKILLed, the Kafka broker restarted, and a clean-stop upgrade (v1 -> v2). Then the
counters a user checks after ``make soak``.
"""

from __future__ import annotations

import pytest

from sluice_dev.paths import Layout
from sluice_dev.soak import run
from sluice_dev.soak.schedule import FaultKind

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

KINDS = (FaultKind.DRIVER_KILL, FaultKind.KAFKA_RESTART)


def test_short_soak_through_a_driver_kill_a_kafka_restart_and_an_upgrade_loses_nothing(
    agent_stack: Layout,
    kafka_bootstrap: str,
    cassandra_contact: str,
    sluice_crd: str,
    namespace: str,
    cassandra_keyspace: str,
) -> None:
    del kafka_bootstrap, cassandra_contact, sluice_crd  # the servers and the CRD, up
    options = run.Options(
        events=6_000,
        rate=50.0,
        faults=len(KINDS),
        kinds=KINDS,
        spec_changes=1,
        seed=7,
        namespace=namespace,
        keyspace=cassandra_keyspace,
        recovery_timeout=240.0,
    )
    summary = run.run(agent_stack, options, say=_say)

    kinds = sorted(r.fault.kind for r in summary.recoveries)
    assert kinds == sorted([*KINDS, FaultKind.SPEC_CHANGE])
    assert [r.fault.number for r in summary.recoveries if r.commit is None] == []
    assert summary.production.sequence_numbers >= 6_000
    assert summary.production.aborted > 0, "the producer aborted transactions"
    assert summary.dead_letters.letters >= summary.production.malformed_committed > 0
    for counter in ("missing", "duplicates", "aborted in sink", "dlq missing"):
        assert f"{counter}: 0" in summary.lines()
    assert {name: value for name, value in summary.counters.items() if value} == {}
    assert summary.passed


def _say(line: str) -> None:
    print(line, flush=True)
