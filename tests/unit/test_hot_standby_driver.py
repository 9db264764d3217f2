"""The driver's side of a hot standby (``sluice_job.hot_standby``, ``control``): it
claims only when promoted (a release by the running driver is not its turn), or when
a newer epoch shows; it keeps warm while it waits; its control port takes only a
promotion naming its epoch, as the operator sends it (``sluice_operator.promote``)."""

from __future__ import annotations

import http.client
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from cassandra.cluster import NoHostAvailable

from sluice_api import promotion
from sluice_job.checkpoint import Checkpoint
from sluice_job.control import Control
from sluice_job.hot_standby import hot_turn, wait_for_promotion
from sluice_job.standby import Turn
from sluice_operator import builders, promote, reconcile, scrapes
from sluice_operator.actions import Decision, Promote
from sluice_operator.model import Phase, Status
from sluice_operator.scrapeget import Outcome
from sluice_operator.settings import DEFAULTS
from tests.support.observations import observed
from tests.support.waiting import wait_for

pytestmark = pytest.mark.unit

OLD = uuid.uuid4()


def row(epoch: int = 4, *, released: bool = False) -> Checkpoint:
    return Checkpoint(41, {}, epoch, OLD, "job:v1", released)


def test_only_a_promotion_or_a_newer_epoch_is_a_hot_standbys_turn() -> None:
    assert hot_turn(row(), 5, promoted=False) is Turn.WAIT
    assert hot_turn(row(released=True), 5, promoted=False) is Turn.WAIT, (
        "a release may be an upgrade's: the standby of the old spec must not take over"
    )
    assert hot_turn(row(), 5, promoted=True) is Turn.FENCE
    assert hot_turn(row(released=True), 5, promoted=True) is Turn.CLAIM
    assert hot_turn(row(epoch=5), 5, promoted=False) is Turn.CLAIM, "the claim says fenced"


@dataclass
class World:
    """A checkpoint row, a clock that moves only when the standby waits, and the
    promotion the operator sends after ``promote_after`` seconds of waiting."""

    seen: list[Checkpoint | Exception]
    promote_after: float | None = None
    now: float = 0.0
    reads: int = 0
    warmed: list[float] = field(default_factory=list)
    promoted: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def load(self, *, serial: bool = False) -> Checkpoint:
        self.reads += 1
        item = self.seen[min(self.reads, len(self.seen)) - 1]
        if isinstance(item, Exception):
            raise item
        return item

    def clock(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds
        if self.promote_after is not None and self.now >= self.promote_after:
            self.promoted.set()
        if self.now > 3600:
            self.stop.set()  # the test's own deadline

    def warm(self) -> None:
        self.warmed.append(self.now)


def wait(world: World) -> object:
    class Promoted(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            world.tick(timeout or 0.0)
            return world.promoted.is_set()

        def is_set(self) -> bool:
            return world.promoted.is_set()

    return wait_for_promotion(
        world,
        5,
        world.stop,
        Promoted(),
        world.warm,
        clock=world.clock,
        poll=0.5,
        check_every=2.0,
        warm_every=30.0,
    )


def test_a_promoted_standby_fences_the_driver_it_replaces_and_kept_warm_meanwhile() -> None:
    world = World([row()], promote_after=100.0)
    predecessor = wait(world)
    assert predecessor is not None
    assert (predecessor.epoch, predecessor.batch_id, predecessor.turn) == (4, 41, Turn.FENCE)
    assert 100.0 <= world.now <= 100.5, "claimed within a poll of the promotion"
    assert len(world.warmed) == 3, world.warmed  # at 30, 60 and 90 s
    assert world.reads <= 100 / 2.0 + 2, "the row is read every check_every, not every poll"


def test_a_released_pipeline_is_not_taken_over_without_a_promotion() -> None:
    world = World([row(released=True)])
    assert wait(world) is None, "waited until stopped (the test's deadline)"


def test_a_newer_epoch_in_the_row_ends_the_wait_with_a_claim_that_says_fenced() -> None:
    world = World([row(), row(), row(epoch=6)])
    predecessor = wait(world)
    assert predecessor is not None
    assert predecessor.turn is Turn.CLAIM
    assert predecessor.epoch == 6


def test_a_cassandra_outage_while_waiting_is_waited_out() -> None:
    world = World([NoHostAvailable("down", {}), row()], promote_after=10.0)
    predecessor = wait(world)
    assert predecessor is not None
    assert predecessor.turn is Turn.FENCE


def test_a_standby_asked_to_stop_claims_nothing() -> None:
    world = World([row()])
    world.stop.set()
    assert wait(world) is None


@pytest.fixture
def control() -> Iterator[Control]:
    served = Control("127.0.0.1", 0, epoch=5).start()
    yield served
    served.close()


def post(port: int, path: str, body: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("POST", path, body=body)
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_control_port_takes_only_a_promotion_naming_its_epoch(control: Control) -> None:
    assert post(control.port, "/metrics", promotion.body(5)) == 404
    assert post(control.port, promotion.PATH, b"epoch=5") == 400
    assert post(control.port, promotion.PATH, b"x" * (promotion.MAX_BODY + 1)) == 400
    assert post(control.port, promotion.PATH, promotion.body(4)) == 409
    assert not control.promoted.is_set()
    assert promote.send("127.0.0.1", control.port, 5) is True
    assert control.promoted.is_set()


def test_a_promotion_the_standby_does_not_take_is_reported_not_raised(control: Control) -> None:
    assert promote.send("127.0.0.1", control.port, 6) is False
    control.close()
    assert promote.send("127.0.0.1", control.port, 5, timeout=1.0) is False
    assert not control.promoted.is_set()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_promotion_decided_twice_at_once_is_sent_once_and_never_again_once_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen in bench.failover: the reconcile that follows the promotion's own status
    write still read ``standby_ready`` on the standby's metrics and sent the promotion
    again; that one reached the control port as the standby closed it after taking the
    first, and the operator warned "not reached" on every failover. The operator's
    reconcile (``_apply``) now sends one promotion at most every
    ``promote.RESEND_SECONDS``, on the driver exchange threads, and never again once
    the standby took it; one that was lost is sent again after that."""
    host = "127.91.17.3"  # a pod's own address, as the node agent gives each pod
    served = Control(host, builders.CONTROL_PORT, epoch=5).start()
    taken: list[bytes] = []
    take = served.take
    monkeypatch.setattr(served, "take", lambda body: (taken.append(body), take(body))[1])
    clock = Clock()
    promotions = promote.Promotions(exchanges=scrapes.Exchanges(), clock=clock)
    monkeypatch.setattr(promote, "PROMOTIONS", promotions)
    decision = Decision((Promote("kpis-driver-5", host, 5),))
    observation = observed(Status(phase=Phase.RUNNING, epoch=5, driver_pod="kpis-driver-5"))
    try:
        reconcile._apply(FakeKube(), observation, decision, [])  # type: ignore[arg-type]
        clock.now += 0.02
        reconcile._apply(FakeKube(), observation, decision, [])  # type: ignore[arg-type]
        wait_for(served.promoted.is_set, timeout=10, what="the promotion taken")
        wait_for(lambda: promotions.taken(host, builders.CONTROL_PORT, 5), timeout=10, what="taken")
        clock.now += promote.RESEND_SECONDS
        reconcile._apply(FakeKube(), observation, decision, [])  # type: ignore[arg-type]
        assert len(taken) == 1
    finally:
        served.close()

    lost = ("127.91.17.4", builders.CONTROL_PORT, 6)  # nothing listens: not reached
    assert promotions.promote(*lost)
    wait_for(lambda: not promotions.exchanges.busy(), timeout=10, what="the send done")
    assert not promotions.promote(*lost)  # too soon
    clock.now += promote.RESEND_SECONDS
    assert promotions.promote(*lost)


class FakeKube:
    """The API server: a promotion never goes there."""

    def apply(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("a promotion went to the API server")


def test_a_standby_whose_control_port_stalls_is_not_asked_every_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38, finding 1: a driver that says it is a promoted standby still waiting
    (its own ``/metrics``: a tenant's code) and whose control port never answers made
    the operator reconcile its pipeline every second (``PROMOTE_RETRY_SECONDS``), each
    time sending the promotion again: 250 such drivers alone were 250 reconciles a
    second. Once its port is backed off (``scrapes``), the pipeline is looked at again
    no sooner than every ``progress_seconds``."""
    exchanges = scrapes.Exchanges()
    promotions = promote.Promotions(exchanges=exchanges)
    monkeypatch.setattr(promote, "PROMOTIONS", promotions)
    host = "127.91.17.5"
    endpoint = scrapes.endpoint(host, builders.CONTROL_PORT)
    exchanges.submit(("stall",), endpoint, 1.0, lambda: Outcome.MISBEHAVED)
    wait_for(lambda: exchanges.suspect(endpoint), timeout=10, what="the port backed off")
    decision = Decision((Promote("kpis-driver-5", host, 5),), requeue_after=1.0)
    observation = observed(Status(phase=Phase.RUNNING, epoch=5, driver_pod="kpis-driver-5"))

    applied = reconcile._apply(FakeKube(), observation, decision, [])  # type: ignore[arg-type]

    assert applied.requeue_after == DEFAULTS.progress_seconds
    assert applied.actions == decision.actions
