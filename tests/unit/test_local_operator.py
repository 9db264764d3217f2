"""``sluice-dev operator start|stop`` and ``pipeline apply --namespace``: which stack
process serves a namespace, and what the command line makes of its options (the pure
parts; ``tests/integration/test_operator_command.py`` runs the command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice_dev import cli, demo, localrun
from sluice_dev.paths import Layout

pytestmark = pytest.mark.unit

MANIFEST = {
    "apiVersion": "sluice.dev/v1alpha1",
    "kind": "StreamingPipeline",
    "metadata": {"name": "orders", "namespace": "analytics"},
    "spec": {
        "image": "orders/job:v1",
        "source": {"kafka": {"bootstrapServers": "kafka:9092", "topics": ["orders"]}},
        "sink": {"cassandra": {"contactPoints": ["c:9042"], "keyspace": "k", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["c:9042"]}},
    },
}


def test_the_demo_namespace_shares_the_demos_operator_and_others_get_their_own() -> None:
    assert localrun.operator_process("sluice-demo") == demo.OPERATOR
    assert localrun.operator_process("orders-trial") == "operator-orders-trial"
    assert localrun.operator_process("a") != localrun.operator_process("b")


def test_a_manifest_runs_in_the_namespace_asked_for_whatever_its_own() -> None:
    body = localrun.localized(
        MANIFEST, namespace="orders-trial", bootstrap="k:1", contact="c:2", pubsub="p:3"
    )
    assert body["metadata"] == {"name": "orders", "namespace": "orders-trial"}
    assert MANIFEST["metadata"]["namespace"] == "analytics"  # type: ignore[index]


def test_pipeline_apply_defaults_to_the_demo_namespace_and_takes_another() -> None:
    parser = cli._parser()
    assert parser.parse_args(["pipeline", "apply", "p.yaml"]).namespace == "sluice-demo"
    chosen = parser.parse_args(["pipeline", "apply", "p.yaml", "--namespace", "orders-trial"])
    assert (chosen.namespace, chosen.file) == ("orders-trial", Path("p.yaml"))


@pytest.mark.parametrize("action", ["start", "stop"])
def test_operator_commands_take_a_namespace(action: str) -> None:
    parser = cli._parser()
    assert parser.parse_args(["operator", action]).namespace == "sluice-demo"
    assert parser.parse_args(["operator", action, "-n", "orders-trial"]).namespace == (
        "orders-trial"
    )


def test_stopping_an_operator_that_does_not_run_says_so(tmp_path: Path) -> None:
    layout = Layout(cache=tmp_path / "cache", stack=tmp_path / "stack")
    layout.pidfile("operator-orders-trial").parent.mkdir(parents=True)
    layout.pidfile("operator-orders-trial").write_text("999999999\n")  # no such process
    assert localrun.stop_operator(layout, "orders-trial") is None
    assert not layout.pidfile("operator-orders-trial").exists()
