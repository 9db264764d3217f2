"""Shared fixtures: the local stack, brought up once per test run, and per-test
isolation (a fresh Kafka topic, Cassandra keyspace or Kubernetes namespace each).

If a stack is already up (say, left running by ``make demo``), the run reuses it and
leaves it running; otherwise the run starts one and stops it at the end.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from sluice_dev import stack as local_stack
from sluice_dev.paths import Layout


@pytest.fixture(scope="session")
def layout() -> Layout:
    return Layout.from_env()


@pytest.fixture(scope="session")
def stack(layout: Layout) -> Iterator[Layout]:
    """Every server of the local stack, healthy."""
    already_up = all(state.healthy for state in local_stack.status(layout))
    if not already_up:
        local_stack.up(layout)
    yield layout
    if not already_up:
        local_stack.down(layout)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names like ``<prefix>-<test name>-<random>``, safe for topics, keyspaces
    (``-`` becomes ``_``) and namespaces (at most 63 characters)."""

    def make(prefix: str) -> str:
        test = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30]
        return f"{prefix}-{test}-{uuid.uuid4().hex[:6]}".strip("-")

    return make
