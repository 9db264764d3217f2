"""The commit-tail probe's arithmetic (``bench.commit_tail``): which share of a
commit is the client's, the histogram's buckets, and the Paxos steps named."""

from __future__ import annotations

import pytest

from bench.commit_tail import Sample, histogram, report, step

pytestmark = pytest.mark.unit


def test_the_clients_share_is_what_it_waited_beyond_the_coordinator() -> None:
    assert Sample(0.030, 0.004, ()).outside_s == pytest.approx(0.026)
    assert Sample(0.003, 0.004, ()).outside_s == 0.0, "clocks differ: never negative"
    assert Sample(0.030, None, ()).outside_s is None, "no trace: no split"


def test_the_histogram_counts_each_value_in_its_bucket() -> None:
    lines = histogram([0.5, 1.5, 1.8, 30.0, 500.0]).splitlines()
    counts = {line.split()[1]: int(line.split()[3]) for line in lines}
    assert (counts["1"], counts["2"], counts["50"]) == (1, 2, 1)
    assert lines[-1].split()[:4] == [">", "200", "ms", "1"], "beyond the last bound"
    assert sum(int(line.split()[3]) for line in lines) == 5


def test_the_report_puts_the_slowest_commit_first_with_its_steps() -> None:
    samples = [
        Sample(0.002, 0.0015, ((0.0001, "Parsing UPDATE"),)),
        Sample(0.060, 0.0500, ((0.0002, "Preparing 1a2b"), (0.049, "Committing proposal"))),
    ]
    text = report("idle", samples, slowest=1)
    assert text.startswith("idle: 2 commits traced")
    slow = [line for line in text.splitlines() if "slow:" in line]
    assert slow == ["  slow: waited 60.0 ms, coordinator 50.0 ms: Preparing @0.2, Committing @49.0"]
    assert step("Parsing UPDATE ks.checkpoints SET") == "Parsing UPDATE ks.checkpoints SET"
