"""The Pub/Sub server's place in the stack and the pure parts around it: what
``produce --pubsub`` publishes for a sequence number, the body of a switch change,
the pinned module, and the recipe that decides when the server is rebuilt."""

from __future__ import annotations

import re

import pytest

from sluice_dev import cli, ports, registry, versions
from sluice_dev.events import EventFactory
from sluice_dev.paths import Layout
from sluice_dev.pubsub import publish, remote
from sluice_dev.pubsub.throughput import Measured
from sluice_dev.servers import pubsub

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seq", [0, 9, 10, 19, 29, 1234])
def test_a_message_carries_the_kafka_record_of_its_sequence_number(seq: int) -> None:
    factory = EventFactory(bad_every=10)
    key, value = factory.record(seq)
    assert publish.message(factory, seq) == (value, {"key": key.decode()})


def test_every_tenth_message_is_malformed_as_in_kafka() -> None:
    factory = EventFactory(bad_every=10)
    data = [publish.message(factory, seq)[0] for seq in range(30)]
    bad = [seq for seq in range(30) if factory.is_bad(seq)]
    assert bad == [9, 19, 29]
    assert data[9] == b"{not json"  # the first of the three kinds of malformed record


def test_a_switch_change_carries_only_the_switches_given() -> None:
    assert remote.fault_patch(drop_acks=True) == {"drop_acks": True}
    assert remote.fault_patch(unavailable=False, fail={}) == {"unavailable": False, "fail": {}}
    assert remote.fault_patch() == {}


def test_the_pinned_version_is_the_one_the_module_requires() -> None:
    go_mod = (pubsub.ARTIFACT.recipe[0].parent / "go.mod").read_text()
    assert f"cloud.google.com/go/pubsub/v2 v{versions.PUBSUB_GO}\n" in go_mod


def test_every_source_of_the_server_is_part_of_its_cache_key() -> None:
    names = {path.name for path in pubsub.ARTIFACT.recipe}
    module = pubsub.ARTIFACT.recipe[0].parent
    assert {path.name for path in module.glob("*.go")} | {"go.mod", "go.sum"} == names
    assert {"main.go", "faults.go", "control.go"} <= names


def test_the_server_is_in_the_default_stack_and_exported_as_an_emulator_host() -> None:
    assert pubsub.NAME in [server.name for server in registry.defaults()]
    layout = Layout.from_env()
    exports = registry.server(pubsub.NAME).exports(layout)
    assert exports["PUBSUB_EMULATOR_HOST"] == f"127.0.0.1:{ports.PUBSUB}"
    assert re.fullmatch(r"127\.0\.0\.1:\d+", pubsub.HOST)
    assert ports.PUBSUB_CONTROL == ports.PUBSUB + 1


def test_pubsub_options_without_pubsub_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["produce", "--topic", "t", "--count", "1", "--subscription", "s"]
    assert cli.main(argv) == 2
    assert "need --pubsub" in capsys.readouterr().err


def test_a_throughput_line_gives_count_time_and_rate() -> None:
    line = Measured("unary pull (1000) + ack", 10_000, 2.0).line()
    assert "10,000 messages in   2.00s" in line
    assert line.endswith("5,000/s")
