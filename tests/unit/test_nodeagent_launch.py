"""What a container runs on the node agent: its argv from the pod and the image (as
Kubernetes combines ``command``/``args`` with ENTRYPOINT/CMD), and the ``kubernetes``
Service's variables a kubelet gives it, below the pod's own and seen by ``$(VAR)``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Pod

from sluice_dev.nodeagent.kubeservice import service_env
from sluice_dev.nodeagent.podnet import pod_ip
from sluice_dev.nodeagent.podspec import (
    ConfigError,
    LaunchPlan,
    NodeDefaults,
    Placement,
    combine,
    launch_plan,
)

pytestmark = pytest.mark.unit

JOB = ("python", "-m", "sluice_job")
UID = "0b6f7a52-59c4-4d3e-8d33-3c1f5e0a9b10"
API = "https://127.0.0.1:16443"


class NoSources:
    def secret(self, name: str) -> Mapping[str, str] | None:
        return None

    def config_map(self, name: str) -> Mapping[str, str] | None:
        return None


def plan(
    tmp_path: Path,
    container: dict[str, Any],
    *,
    code_root: Path | None = None,
    entrypoint: tuple[str, ...] = JOB,
) -> LaunchPlan:
    pod = V1Pod.model_validate(
        {
            "metadata": {"name": "exec-1", "namespace": "ns", "uid": UID},
            "spec": {"containers": [{"name": "spark-kubernetes-executor", **container}]},
        }
    )
    assert pod.spec is not None
    node = NodeDefaults(
        base_env={"PATH": "/venv/bin"}, service_env=service_env(API), entrypoint=entrypoint
    )
    place = Placement(code_root, tmp_path / "scratch", tmp_path / "termination-log")
    return launch_plan(pod, pod.spec.containers[0], node, place, NoSources())


def image(tmp_path: Path, entrypoint: list[str] | None, cmd: list[str] | None = None) -> Path:
    root = tmp_path / "image"
    root.mkdir()
    if entrypoint is not None:
        (root / "image.entrypoint").write_text(json.dumps(entrypoint))
    if cmd is not None:
        (root / "image.cmd").write_text(json.dumps(cmd))
    return root


@pytest.mark.parametrize(
    ("command", "args", "argv"),
    [
        (["java", "-jar"], ["x.jar"], ["java", "-jar", "x.jar"]),  # command replaces both
        (["java"], None, ["java"]),  # CMD is dropped with a command
        (None, ["executor"], ["/ep", "executor"]),  # args replace CMD only
        ([], ["executor"], ["/ep", "executor"]),  # an empty command is no command
        (None, None, ["/ep", "--cmd"]),
        (None, [], ["/ep", "--cmd"]),
    ],
)
def test_command_and_args_combine_with_the_images_entrypoint_and_cmd(
    command: list[str] | None, args: list[str] | None, argv: list[str]
) -> None:
    assert combine(command, args, ["/ep"], ["--cmd"]) == argv


def test_an_executor_pod_with_only_args_runs_the_agents_default_entrypoint(
    tmp_path: Path,
) -> None:
    launched = plan(
        tmp_path,
        {
            "args": ["executor", "--pod", "$(SPARK_EXECUTOR_POD_NAME)"],
            "env": [
                {
                    "name": "SPARK_EXECUTOR_POD_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                }
            ],
        },
    )
    assert launched.argv == (*JOB, "executor", "--pod", "exec-1")


def test_an_images_entrypoint_file_wins_over_the_default_and_its_cmd_needs_no_args(
    tmp_path: Path,
) -> None:
    root = image(tmp_path, ["/opt/entrypoint.sh"], ["driver"])
    assert plan(tmp_path, {}, code_root=root).argv == ("/opt/entrypoint.sh", "driver")
    assert plan(tmp_path, {"args": ["executor"]}, code_root=root).argv == (
        "/opt/entrypoint.sh",
        "executor",
    )


def test_the_images_own_words_are_not_expanded_but_the_pods_are(tmp_path: Path) -> None:
    root = image(tmp_path, ["echo", "$(POD_IP)"])
    launched = plan(
        tmp_path,
        {
            "args": ["$(POD_IP)", "$$(POD_IP)"],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        },
        code_root=root,
    )
    assert launched.argv == ("echo", "$(POD_IP)", pod_ip(UID), "$(POD_IP)")
    assert launched.env["POD_IP"] == pod_ip(UID) != "127.0.0.1"


def test_no_command_and_no_entrypoint_is_a_config_error_naming_the_container(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="'spark-kubernetes-executor' has no command"):
        plan(tmp_path, {}, entrypoint=())


def test_without_any_entrypoint_args_alone_are_the_argv_as_dockers_rule_says(
    tmp_path: Path,
) -> None:
    launched = plan(tmp_path, {"args": ["python", "-c", "pass"]}, entrypoint=())
    assert launched.argv == ("python", "-c", "pass")


def test_a_malformed_entrypoint_file_names_the_file(tmp_path: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()
    (root / "image.entrypoint").write_text("python -m sluice_job")
    with pytest.raises(ConfigError, match=r"image.entrypoint: not JSON"):
        plan(tmp_path, {"args": ["executor"]}, code_root=root)
    (root / "image.entrypoint").write_text('"python"')
    with pytest.raises(ConfigError, match=r"expected a JSON array of strings"):
        plan(tmp_path, {"args": ["executor"]}, code_root=root)


def test_every_container_finds_the_api_server_the_agent_uses(tmp_path: Path) -> None:
    env = plan(tmp_path, {"command": ["true"]}).env
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == env["KUBERNETES_SERVICE_PORT_HTTPS"] == "16443"
    assert env["KUBERNETES_PORT"] == "tcp://127.0.0.1:16443"
    assert env["KUBERNETES_PORT_16443_TCP_ADDR"] == "127.0.0.1"


def test_the_spark_master_url_expands_from_the_service_variables(tmp_path: Path) -> None:
    master = "k8s://https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"
    launched = plan(
        tmp_path,
        {
            "command": ["spark-submit", "--master", master],
            "env": [{"name": "MASTER", "value": master}],
        },
    )
    assert launched.argv[-1] == "k8s://https://127.0.0.1:16443"
    assert launched.env["MASTER"] == "k8s://https://127.0.0.1:16443"


def test_the_pods_own_variables_win_over_the_services_also_in_expansion(
    tmp_path: Path,
) -> None:
    launched = plan(
        tmp_path,
        {
            "command": ["echo", "$(KUBERNETES_SERVICE_HOST)"],
            "env": [
                {"name": "BEFORE", "value": "$(KUBERNETES_SERVICE_HOST)"},
                {"name": "KUBERNETES_SERVICE_HOST", "value": "api.example"},
                {"name": "AFTER", "value": "$(KUBERNETES_SERVICE_HOST)"},
            ],
        },
    )
    assert launched.env["KUBERNETES_SERVICE_HOST"] == "api.example"
    assert launched.env["KUBERNETES_SERVICE_PORT"] == "16443"
    assert (launched.env["BEFORE"], launched.env["AFTER"]) == ("127.0.0.1", "api.example")
    assert launched.argv == ("echo", "api.example")


def test_an_api_server_url_without_a_port_means_443() -> None:
    assert service_env("https://api.example")["KUBERNETES_SERVICE_PORT"] == "443"
    with pytest.raises(ValueError, match="not https"):
        service_env("http://127.0.0.1:8080")
