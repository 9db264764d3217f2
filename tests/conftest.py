"""Fixtures every suite may use, none of which needs a server: the stack's layout,
unique names, the tools the stack builds (helm, promtool), and the timing summary of
``make test``. The servers' fixtures are in ``tests/support/fixtures.py``, brought in
by the integration and e2e suites' own conftest files, so ``pytest -m unit`` never
sees them.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest
from hypothesis import settings

from sluice_dev import netns
from sluice_dev.paths import Layout

# Property tests assert properties, not speed: Hypothesis's 200 ms deadline per example
# fails them on a loaded 2-core machine (seen while a soak and a CI rehearsal ran).
settings.register_profile("sluice", deadline=None)
settings.load_profile("sluice")

JIT_C1_ONLY = "-XX:TieredStopAtLevel=1"
"""The Spark JVMs the tests start (drivers run directly, as pods of the node agent or by
the soak harness) compile with C1 only. A test's driver lives for seconds to minutes
and moves a few thousand records, so C2's optimising compiles of Spark's code are CPU
spent on code that never runs long: on this project's 2-core machine, a session's start
and five small aggregations took 37-43 s of JVM CPU by default and 21-22 s with C1
only. The suite is CPU-bound, so this is its wall clock too. The product's drivers
compile so too by default (``spec.spark.jit: C1``: a long-running driver's batches of a
few thousand records also cost less CPU with C1 only, docs/tuning.md); this covers
every JVM a test starts, Spark's launcher and the benchmark's contenders among them.
Spark reads ``SPARK_SUBMIT_OPTS`` for the driver's JVM and ``SPARK_LAUNCHER_OPTS`` for
its launcher's; the node agent passes both to its pods."""


def pytest_configure(config: pytest.Config) -> None:
    del config
    if netns.ENABLED:
        # Before any thread starts: setns moves the calling thread only.
        netns.enter(Layout.from_env())
    for name in ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS"):
        os.environ.setdefault(name, JIT_C1_ONLY)


LONG: Final = {
    "tests/e2e/test_executors.py": "executors through four faults: 369 s",
    "tests/e2e/test_hot_standby.py": "a hot standby through a kill and a partition: 154 s",
    "tests/e2e/test_warm_handover.py": "a failed standby, then a warm handover: 163 s",
    "tests/e2e/test_pipeline.py::test_partitioned_node_fails_over": "a partition: 144 s",
    "tests/e2e/test_pipeline.py::test_code_upgrade_with_the_operator_killed": "upgrades: 276 s",
    "tests/integration/test_driver_backpressure.py": "a 21,000-record backlog at 10 ms each: 218 s",
    "tests/integration/test_driver_lifecycle.py::test_backlog_is_drained": "a capped backlog",
    "tests/integration/test_driver_retention.py": "records deleted by retention: 81 s",
    "tests/integration/test_driver_recreated_topic.py": "a topic recreated: 85 s",
    "tests/integration/test_stack_kafka.py::test_a_restarted_broker": "the dev stack's Kafka",
    "tests/integration/test_hostile_tenant.py::test_a_thousand_hostile": "1,000 pipelines: 620 s",
    "tests/integration/test_driver_state.py::test_page_totals_are_exact_through_kills": (
        "running totals through two kills: 100 s (the unique-visitors example's test kills a "
        "driver after its writes too, over state rewritten each batch)"
    ),
    "tests/integration/test_example_dedup.py": (
        "de-duplication through a kill, a zombie and an upgrade: 102 s (the unique-visitors "
        "example's test makes the same faults, over windows)"
    ),
    "tests/integration/test_driver_low_latency.py::test_low_latency_counts_every_record_once": (
        "the low-latency mode's KPI sums through a kill, a zombie and an upgrade: 61 s (the "
        "short soak's low-latency mode makes a kill, a partition whose driver is fenced and an "
        "upgrade, checked by the soak's own counters)"
    ),
    "tests/integration/test_stateful_examples.py::"
    "test_a_stateful_example_is_exact_through_a_kill_a_zombie_and_an_upgrade[sessions]": (
        "sessions through a kill, a zombie and an upgrade: 148 s (as above; "
        "tests/integration/test_sessions.py covers the sessions themselves)"
    ),
}
"""Tests ``make test`` leaves out (marked ``long``; ``make test-long`` runs them), with
their cost on the 2-core machine (28 November 2026, C1 only): the whole suite no longer
finished within CI's 90 minutes there (the last CI run stopped at 5400 s, a third of
the way through the integration tests). The faults of the e2e scenarios are also in
shorter tests that stay: a driver kill, a Kafka restart and an upgrade (the short
soak), operator failover (``test_operator_failover``), fencing and crashes
(``test_driver_fencing``, ``test_driver_crashes``). The four driver paths (the
backpressure cap, a capped backlog, retention, a recreated topic) only these tests
cover: CI no longer runs them. ``test_driver_crashes`` stays, with one kill per phase
of the batch cycle (five); ``SLUICE_CRASH_KILLS=8`` gives it its former eight."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(tuple(LONG)):
            item.add_marker(pytest.mark.long)


@pytest.fixture(scope="session")
def layout() -> Layout:
    return Layout.from_env()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names like ``<prefix>-<test name>-<random>``, safe for topics, keyspaces
    (``-`` becomes ``_``) and namespaces (at most 63 characters)."""

    def make(prefix: str) -> str:
        test = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30]
        return f"{prefix}-{test}-{uuid.uuid4().hex[:6]}".strip("-")

    return make


# -- tools built by the stack -------------------------------------------------------


def _provisioned(path: Path) -> Path:
    if not path.is_file():
        pytest.fail(f"{path.name} is not provisioned at {path}: run `make provision`")
    return path


@pytest.fixture(scope="session")
def helm_binary(layout: Layout) -> Path:
    from sluice_dev.servers import tools

    return _provisioned(tools.helm(layout))


@pytest.fixture(scope="session")
def promtool(layout: Layout) -> Path:
    from sluice_dev.servers import tools

    return _provisioned(tools.promtool(layout))


@pytest.fixture(scope="session")
def relabel_binary(layout: Layout) -> Path:
    from sluice_dev.servers import tools

    return _provisioned(tools.relabel(layout))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under `make test`: the wall clock of the whole command and of its parts."""
    started = os.environ.get("SLUICE_TEST_STARTED")
    if not started:
        return
    wall = time.time() - float(started)
    provision = float(os.environ.get("SLUICE_TEST_PROVISION_SECONDS", "0"))
    lint = float(os.environ.get("SLUICE_TEST_LINT_SECONDS", "0"))
    tests = wall - provision - lint
    terminalreporter.write_sep("=", "make test timing")
    terminalreporter.write_line(
        f"make test: {_minutes(wall)} wall clock: setup and provisioning {_minutes(provision)}, "
        f"lint and typecheck {_minutes(lint)}, tests {_minutes(tests)}"
    )


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
