"""``sluice-dev logs POD``: a pod's log read from the node agent's files, as ``kubectl
logs`` would show it (the newest pod of the name, its only or named container, its
last run or the one before), since nothing serves the kubelet API on the stack."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice_dev import cli
from sluice_dev.nodeagent import podlogs

pytestmark = pytest.mark.unit


def run_log(state: Path, pod_dir: str, container: str, restart: int, text: str) -> Path:
    log = state / "pods" / pod_dir / container / f"{restart}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(text)
    return log


def test_the_newest_pod_of_a_name_its_only_container_and_its_last_run(tmp_path: Path) -> None:
    old = run_log(tmp_path, "orders_driver-1_uid-old", "driver", 0, "old pod\n")
    os.utime(old.parents[1], (1, 1))
    run_log(tmp_path, "orders_driver-1_uid-new", "driver", 9, "run 9\n")
    last = run_log(tmp_path, "orders_driver-1_uid-new", "driver", 10, "run 10\n")
    run_log(tmp_path, "other_driver-1_uid-x", "driver", 11, "another namespace\n")

    assert podlogs.find(tmp_path, "orders", "driver-1") == last
    previous = podlogs.find(tmp_path, "orders", "driver-1", previous=True)
    assert previous.read_text() == "run 9\n"


def test_what_is_missing_is_named(tmp_path: Path) -> None:
    run_log(tmp_path, "orders_two_uid", "a", 0, "")
    run_log(tmp_path, "orders_two_uid", "b", 0, "")
    with pytest.raises(podlogs.PodLogError, match="no pod orders/gone has run"):
        podlogs.find(tmp_path, "orders", "gone")
    with pytest.raises(podlogs.PodLogError, match="containers: a, b; name one with -c"):
        podlogs.find(tmp_path, "orders", "two")
    assert podlogs.find(tmp_path, "orders", "two", "b").parent.name == "b"
    with pytest.raises(
        podlogs.PodLogError, match=r"container a of pod orders/two has no previous run"
    ):
        podlogs.find(tmp_path, "orders", "two", "a", previous=True)


def test_sluice_dev_logs_prints_a_pods_log_or_a_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICE_STACK_DIR", str(tmp_path))
    agent_state = tmp_path / "data" / "node-agent"
    lines = "".join(f"batch {n} committed\n" for n in range(100))
    run_log(agent_state, "orders-trial_orders-driver-2_uid", "driver", 0, lines)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "kafka.log").write_text("kafka started\n")

    assert cli.main(["logs", "orders-driver-2", "-n", "orders-trial", "--lines", "2"]) == 0
    assert capsys.readouterr().out == "batch 98 committed\nbatch 99 committed\n"
    assert cli.main(["logs", "kafka"]) == 0
    assert capsys.readouterr().out == "kafka started\n"
    assert cli.main(["logs", "orders-driver-2"]) == 1  # sluice-demo has no such pod
    assert "no pod sluice-demo/orders-driver-2" in capsys.readouterr().err
