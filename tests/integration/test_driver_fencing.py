"""Two drivers for one pipeline: the older one is fenced and its late writes lose.

Driver A (epoch 1) runs; driver B (epoch 2) claims the same pipeline. A's next
commit is refused and A exits 3; the batch history holds no commit by A after B's
claim; the sink holds B's values for everything after B's claim, even when A
writes after B (A frozen with SIGSTOP across B's claim, then resumed).
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from typing import Any

import pytest

from sluice_dev.events import EventFactory
from sluice_dev.produce import produce
from tests.support import state
from tests.support.driver import Driver, DriverRun, drain_and_stop, spec
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

RECORDS = 6_000
PARTITIONS = 4
CAP = 250
"""Per partition: 1,000 records a batch, 6 batches in all: A commits two before B's
claim, B commits the rest (in the frozen scenario, A's planned batch and one more)."""


@dataclass
class Scenario:
    bootstrap: str
    topic: str
    session: Any
    keyspace: str
    driver: Driver
    spec_a: dict[str, Any]
    spec_b: dict[str, Any]

    @property
    def pipeline_id(self) -> str:
        return self.driver.checkpoint_key

    def committed_batches(self) -> int:
        row = state.checkpoint_row(self.session, self.keyspace, self.pipeline_id)
        return int(row.batch_id) if row else 0

    def drain_and_stop(self, run: DriverRun) -> None:
        ends = state.end_offsets(self.bootstrap, self.topic, PARTITIONS)
        drain_and_stop(
            run,
            self.session,
            self.keyspace,
            self.pipeline_id,
            ends,
            what="driver B to commit the end offsets",
        )

    def boundary(self) -> dict[int, int]:
        """Positions committed when B (epoch 2) claimed the pipeline."""
        claim = self.claim(2)
        position = dict.fromkeys(range(PARTITIONS), 0)
        for batch in state.history(self.session, self.keyspace, self.pipeline_id):
            if batch.batch_id <= claim.batch_id_at_claim:
                for parts in json.loads(batch.ranges).values():
                    for partition, (_start, end) in parts.items():
                        position[int(partition)] = end
        return position

    def claim(self, epoch: int) -> Any:
        claims = state.claims(self.session, self.keyspace, self.pipeline_id)
        return next(c for c in claims if c.epoch == epoch)

    def assert_fenced_and_b_owns_everything_after_its_claim(self, a: DriverRun) -> None:
        assert a.message()["reason"] == "Fenced"
        assert a.message()["heldByEpoch"] == 2, "the operator starts its next driver above it"
        owner_a, claim_b = self.claim(1).owner, self.claim(2)
        history = state.history(self.session, self.keyspace, self.pipeline_id)
        late = [
            b.batch_id
            for b in history
            if b.owner == owner_a and b.batch_id > claim_b.batch_id_at_claim
        ]
        assert late == [], "driver A committed after B's claim"
        assert [b.batch_id for b in history] == list(range(1, len(history) + 1))
        boundary = self.boundary()
        rows = state.events(self.session, self.keyspace)
        assert len(rows) == RECORDS
        for row in rows.values():
            after_claim = row.source_offset >= boundary[row.source_partition]
            assert row.tag == ("B" if after_claim else "A"), (row.event_id, boundary)


@pytest.fixture
def scenario(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    driver: Driver,
) -> Scenario:
    topic = kafka_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, RECORDS, factory=EventFactory(seed=3))
    common = {
        "bootstrap": kafka_bootstrap,
        "topic": topic,
        "contact": cassandra_contact,
        "keyspace": events_table,
        "cap": CAP,
    }
    return Scenario(
        kafka_bootstrap,
        topic,
        cassandra,
        events_table,
        driver,
        spec(**common, options={"tag": "A"}),
        spec(**common, options={"tag": "B"}),
    )


def test_older_driver_cannot_commit_after_a_newer_claim(scenario: Scenario) -> None:
    a = scenario.driver.start(scenario.spec_a, epoch=1, failpoints="after_write=4")
    wait_for(lambda: scenario.committed_batches() >= 2, timeout=240, what="A to commit twice")
    a.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "after_write",
        timeout=120,
        what="A between write and commit",
    )
    b = scenario.driver.start(scenario.spec_b, epoch=2)
    assert a.wait(240) == 3
    scenario.drain_and_stop(b)
    scenario.assert_fenced_and_b_owns_everything_after_its_claim(a)
    # A pipeline re-created under its old name starts again at epoch 1: its first
    # driver cannot claim, and says which epoch holds the checkpoint.
    again = scenario.driver.start(scenario.spec_b, epoch=1)
    assert again.wait(240) == 3
    assert again.message()["heldByEpoch"] == 2


def test_frozen_driver_resumed_after_a_newer_claim_writes_late_and_loses(
    scenario: Scenario,
) -> None:
    a = scenario.driver.start(scenario.spec_a, epoch=1, failpoints="read=2")
    wait_for(lambda: scenario.committed_batches() >= 2, timeout=240, what="A to commit twice")
    frozen_batch = a.wait_event(
        lambda e: e.get("event") == "phase" and e["phase"] == "read" and e["batch_id"] >= 3,
        timeout=120,
        what="A about to read a planned batch",
    )["batch_id"]
    a.signal_tree(signal.SIGSTOP)
    b = scenario.driver.start(scenario.spec_b, epoch=2)
    wait_for(
        lambda: scenario.committed_batches() >= frozen_batch + 2,
        timeout=240,
        what="B to re-execute A's planned batch and go on",
    )
    a.signal_tree(signal.SIGCONT)
    assert a.wait(240) == 3
    late = [e for e in a.events() if e.get("event") == "phase" and e["batch_id"] == frozen_batch]
    assert any(e["phase"] == "write" for e in late), "A resumed and wrote its batch late"
    scenario.drain_and_stop(b)
    scenario.assert_fenced_and_b_owns_everything_after_its_claim(a)
