"""Optional servers (the secure Cassandra node) start only when named: not with
``sluice-dev up`` nor the ``stack`` fixture, and not when a test asks for the plain
``cassandra``."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice_dev import netns, registry, stack, versions
from sluice_dev.paths import Layout
from sluice_dev.realnode.servers import kube_proxy_name

pytestmark = pytest.mark.unit


def test_the_default_stack_leaves_out_optional_servers() -> None:
    names = [server.name for server in stack.with_requirements(None)]
    assert "cassandra-secure" not in names
    assert {"kafka", "cassandra"} <= set(names)
    assert [s.name for s in registry.defaults()] == names


def test_asking_for_cassandra_starts_only_cassandra() -> None:
    assert [server.name for server in stack.with_requirements(["cassandra"])] == ["cassandra"]


def test_an_optional_server_starts_when_named() -> None:
    assert [s.name for s in stack.with_requirements(["cassandra-secure"])] == ["cassandra-secure"]


def test_a_worker_in_the_stacks_namespace_without_its_binaries_names_the_command_to_build_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a fresh machine's ``make demo``: the first worker's start built the
    kubelet inside the stack's network namespace, where the Go module proxy is out of
    reach ("dial udp 10.255.255.53:53: connect: network is unreachable"). Inside it,
    ``up`` builds nothing: it names what is missing and the command that builds it."""
    layout = Layout(stack=tmp_path / "stack", cache=tmp_path / "cache")
    monkeypatch.setattr(netns, "inside", lambda _layout: True)

    def no_build(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a build inside the stack's network namespace")

    monkeypatch.setattr(stack, "provision", no_build)
    with pytest.raises(stack.StackError) as refused:
        stack.up(layout, [kube_proxy_name(1)], say=lambda _line: None)
    assert f"kubernetes-node {versions.KUBERNETES}" in str(refused.value)
    assert "sluice-dev provision --real-nodes" in str(refused.value)


def test_provisioning_for_real_nodes_adds_what_a_plain_provision_leaves_to_a_worker() -> None:
    on_demand = {a.name for a in registry.ARTIFACTS} - {a.name for a in registry.provisioned()}
    assert {"kubernetes-node", "coredns"} <= on_demand
    needed = {a for s in stack.with_requirements([kube_proxy_name(1)]) for a in s.artifacts}
    assert on_demand <= needed, "a worker needs every one of them"
