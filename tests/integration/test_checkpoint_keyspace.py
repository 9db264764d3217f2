"""The checkpoint keyspace's replication is the user's choice, never a silent default.

Reproduction (before the fix): a driver whose checkpoint keyspace did not exist created
it with ``SimpleStrategy`` and replication factor 1 without a word: on a real cluster
the fencing row then lived on one node, and the loss of that node lost the pipeline's
offsets and its fence. This test's first case failed on that code: the driver ran on
and ``system_schema.keyspaces`` held ``{'class': '...SimpleStrategy',
'replication_factor': '1'}``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.driver import Driver, spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def missing_keyspace(cassandra: Any, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A keyspace name that does not exist; dropped after the test if it came to be."""
    name = unique_name("ck").replace("-", "_")[:48]
    yield name
    cassandra.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


def replication(cassandra: Any, keyspace: str) -> dict[str, str] | None:
    row = cassandra.execute(
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,)
    ).one()
    return dict(row.replication) if row else None


def pipeline(
    kafka_bootstrap: str, topic: str, contact: str, sink: str, checkpoint: dict[str, Any]
) -> dict[str, Any]:
    body = spec(bootstrap=kafka_bootstrap, topic=topic, contact=contact, keyspace=sink)
    body["checkpoint"]["cassandra"].update(checkpoint)
    return body


def test_a_missing_keyspace_ends_the_driver_with_exit_2_naming_it_and_creates_nothing(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    missing_keyspace: str,
    driver: Driver,
) -> None:
    body = pipeline(
        kafka_bootstrap,
        kafka_topic(partitions=1),
        cassandra_contact,
        events_table,
        {"keyspace": missing_keyspace},
    )
    run = driver.start(body, epoch=1)
    assert run.wait(120) == 2
    message = run.message()
    assert message["reason"] == "InvalidConfig"
    assert message["message"].startswith("checkpoint.cassandra.keyspace:")
    assert missing_keyspace in message["message"]
    assert "createKeyspace" in message["message"]
    assert replication(cassandra, missing_keyspace) is None


def test_create_keyspace_uses_the_replication_the_spec_gives(
    kafka_bootstrap: str,
    kafka_topic: Any,
    cassandra_contact: str,
    cassandra: Any,
    events_table: str,
    missing_keyspace: str,
    driver: Driver,
) -> None:
    wanted = {"strategy": "NetworkTopologyStrategy", "datacenters": {"datacenter1": 1}}
    body = pipeline(
        kafka_bootstrap,
        kafka_topic(partitions=1),
        cassandra_contact,
        events_table,
        {"keyspace": missing_keyspace, "createKeyspace": True, "replication": wanted},
    )
    run = driver.start(body, epoch=1)
    run.wait_event(lambda e: e.get("event") == "claimed", timeout=240, what="the driver to claim")
    run.kill(signal.SIGKILL)
    created = wait_for(
        lambda: replication(cassandra, missing_keyspace), timeout=30, what="the keyspace"
    )
    assert created == {
        "class": "org.apache.cassandra.locator.NetworkTopologyStrategy",
        "datacenter1": "1",
    }
    tables = cassandra.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
        (missing_keyspace,),
    )
    assert {"checkpoints", "batches", "claims"} <= {row.table_name for row in tables}
