"""The local stack installs the CRD the way a user would, and waits until the API
server serves it, even in the instant after creation when its status has no
conditions yet (seen in a benchmark: ``kubectl wait`` fails on a null list)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sluice_dev import localcluster
from sluice_dev.kubectl import KubectlError

pytestmark = pytest.mark.unit


class FreshCrd:
    """kubectl against an API server whose CRD shows ``conditions: null`` for its
    first reads, then Established: ``wait`` fails on the null list as kubectl does."""

    def __init__(self, null_reads: int) -> None:
        self.states: Iterator[list[dict[str, str]] | None] = iter(
            [None] * null_reads
            + [[{"type": "NamesAccepted", "status": "True"}]]
            + [[{"type": "Established", "status": "True"}]] * 100
        )
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        self.calls.append(args)
        if args[0] == "apply":
            return "applied"
        conditions = next(self.states)
        if args[0] == "wait":
            if conditions is None:
                raise KubectlError(
                    f"kubectl {' '.join(args)}: error: .status.conditions accessor error: "
                    "<nil> is of the type <nil>, expected []interface{}"
                )
            return "condition met"
        assert args[:2] == ("get", "crd"), args
        return json.dumps({"status": {"conditions": conditions}})


def test_a_crd_just_created_with_null_conditions_is_waited_for_until_established() -> None:
    kubectl = FreshCrd(null_reads=2)
    localcluster.install_crd(kubectl, poll=0.0)  # type: ignore[arg-type]
    reads = [c for c in kubectl.calls if c[0] != "apply"]
    assert len(reads) == 4  # null, null, names accepted, established


def test_a_crd_never_established_fails_naming_it() -> None:
    kubectl = FreshCrd(null_reads=10_000)
    with pytest.raises(TimeoutError, match=r"streamingpipelines\.sluice\.dev"):
        localcluster.install_crd(kubectl, poll=0.0, timeout=0.05)  # type: ignore[arg-type]
