"""A short chaos soak (``sluice_dev.soak``, the harness of ``make soak``) in the e2e
suite: the real operator and driver pods on the stack's node agent, a transactional
producer aborting 10 % of its transactions over a 6-partition topic, 5 % malformed
events, and one fault of each of three kinds while events flow, in both of the
soak's modes. Without a standby: the driver process SIGKILLed, the Kafka broker
restarted and a clean-stop upgrade (v1 -> v2). With a hot standby: the driver's pod
force-deleted, the driver's node cut off the API (its driver left running, the
zombie the fence stops) and a warm-handover upgrade. Then the counters a user checks
after ``make soak``.
"""

from __future__ import annotations

import pytest

from sluice_dev.paths import Layout
from sluice_dev.soak import run
from sluice_dev.soak.schedule import FaultKind

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

MODES = {
    (0, False): (FaultKind.DRIVER_KILL, FaultKind.KAFKA_RESTART),
    (1, False): (FaultKind.POD_DELETE, FaultKind.NODE_PARTITION),
    (0, True): (FaultKind.DRIVER_KILL, FaultKind.NODE_PARTITION),
}
"""(hot standbys, ``trigger.mode: LowLatency``) -> the fault kinds drawn besides the
spec change. The low-latency mode keeps every guarantee of the default (issue 40):
a driver killed, a partitioned node's driver fenced, a clean-stop upgrade."""


@pytest.mark.parametrize(
    ("standby", "low_latency"),
    [
        pytest.param(standby, low, id=f"standby{standby}" + ("-lowlatency" if low else ""))
        for standby, low in sorted(MODES)
    ],
)
def test_short_soak_through_driver_faults_a_dependency_or_node_fault_and_an_upgrade_loses_nothing(
    standby: int,
    low_latency: bool,
    agent_stack: Layout,
    kafka_bootstrap: str,
    cassandra_contact: str,
    sluice_crd: str,
    namespace: str,
    cassandra_keyspace: str,
) -> None:
    del kafka_bootstrap, cassandra_contact, sluice_crd  # the servers and the CRD, up
    kinds = MODES[standby, low_latency]
    options = run.Options(
        events=6_000,
        rate=50.0,
        faults=len(kinds),
        kinds=kinds,
        spec_changes=1,
        seed=7,
        standby=standby,
        low_latency=low_latency,
        namespace=namespace,
        keyspace=cassandra_keyspace,
        recovery_timeout=240.0,
    )
    summary = run.run(agent_stack, options, say=_say)

    mode = summary.lines()[0]
    assert mode.startswith(f"mode: {'standby 1' if standby else 'no standby'}")
    assert ("LowLatency" in mode) is low_latency
    assert sorted(r.fault.kind for r in summary.recoveries) == sorted(
        [*kinds, FaultKind.SPEC_CHANGE]
    )
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
