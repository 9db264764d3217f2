"""Datastore commits of one partition in flight at once (``datastore_flight``): a
later row of a key is never committed before an earlier one, and no more than the
configured commits run at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from sluice_job.sinks.datastore_flight import Flight

pytestmark = pytest.mark.unit


class Gate:
    """Jobs that block until released, recording when they start and finish."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()
        self.release: dict[str, threading.Event] = {}

    def job(self, name: str) -> Callable[[], str]:
        self.release[name] = threading.Event()

        def run() -> str:
            with self.lock:
                self.log.append(f"start {name}")
                self.running += 1
                self.most = max(self.most, self.running)
            assert self.release[name].wait(10), f"{name} never released"
            with self.lock:
                self.running -= 1
                self.log.append(f"end {name}")
            return name

        return run


def test_a_chunk_sharing_a_key_starts_only_after_the_earlier_one_finished() -> None:
    gate, flight = Gate(), Flight[str](4)
    flight.submit({"a", "b"}, gate.job("first"))
    flight.submit({"c"}, gate.job("other"))
    threading.Timer(0.05, gate.release["first"].set).start()
    gate.release["other"].set()

    done = flight.submit({"b", "z"}, gate.job("second"))  # waits for "first"
    gate.release["second"].set()
    done += flight.drain()

    assert gate.log.index("end first") < gate.log.index("start second")
    assert sorted(done) == ["first", "other", "second"]


def test_no_more_than_the_limit_run_at_once_and_every_result_comes_back() -> None:
    gate, flight = Gate(), Flight[str](3)
    jobs = {name: gate.job(name) for name in "abcdefgh"}
    for name in jobs:
        gate.release[name].set()
    results = []
    for name, job in jobs.items():
        results += flight.submit({name}, job)
    results += flight.drain()

    assert sorted(results) == list("abcdefgh")
    assert gate.most <= 3


def test_a_limit_of_one_runs_each_job_inline_in_order() -> None:
    order: list[int] = []
    flight = Flight[int](1)
    results = [r for i in range(5) for r in flight.submit({"k"}, lambda i=i: order.append(i) or i)]  # type: ignore[misc]

    assert results == order == [0, 1, 2, 3, 4]
    assert flight.drain() == []
