"""A driver's Cassandra sessions reconnect for as long as an outage lasts.

Found by the live alert test (issue 42): after a Cassandra outage of more than about
two minutes the driver never reconnected; every attempt failed with "no host tried"
until its pod was deleted, though Cassandra was back. The driver's
``ExponentialReconnectionPolicy`` gives up after 64 attempts by default, about 121 s
at 0.5 s doubling to 2 s."""

from __future__ import annotations

import itertools

import pytest

from sluice_job.cassandra_session import reconnection

pytestmark = pytest.mark.unit


def test_a_lost_node_is_tried_again_every_two_seconds_however_long_it_is_away() -> None:
    delays = list(itertools.islice(reconnection().new_schedule(), 10_000))
    assert len(delays) == 10_000, "the schedule ends: the session gives up on the node"
    assert delays[0] <= 0.6
    assert max(delays) <= 2.0
    assert sum(delays) > 3600, "still trying after an hour of outage"
