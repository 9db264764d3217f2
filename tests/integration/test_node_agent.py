"""The node agent plays the kubelet against the real control plane: pods placed by
the real kube-scheduler run as local processes and report their exit code and
termination message; a pod with only ``args`` runs its image's entrypoint (Spark's
executors); each pod has an IP of its own, where it can bind a port another pod
binds too; a container reaches the API server through ``KUBERNETES_SERVICE_HOST``
and ``KUBERNETES_SERVICE_PORT``; deletion delivers SIGTERM within the grace period
and removes the pod; a partitioned node goes NotReady (set by the real
controller-manager) while its process keeps running as a zombie, and comes back
Ready when healed; a crashed node's processes die at once and, once healed, the
node reports them lost.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import CoreV1Api, V1Pod, V1Service, VersionApi
from kubernetes.client.exceptions import ApiException

from sluice_dev import procs
from sluice_dev.nodeagent import control, podnet, status
from sluice_dev.paths import Layout
from sluice_dev.servers import nodeagent
from tests.support.agents import PrivateAgent, node_ready, wait_default_service_account
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def pod_manifest(name: str, script: str, **spec: Any) -> V1Pod:
    """A one-container pod running ``python -c script`` (``python`` from the agent's PATH)."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "sluice-test:1",
                    "command": ["python", "-c", textwrap.dedent(script)],
                }
            ],
            **spec,
        },
    }
    return V1Pod.model_validate(manifest)


def read_pod(core: CoreV1Api, namespace: str, name: str) -> V1Pod | None:
    try:
        pod: V1Pod = core.read_namespaced_pod(name, namespace)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return pod


def phase(core: CoreV1Api, namespace: str, name: str) -> str | None:
    pod = read_pod(core, namespace, name)
    return pod.status.phase if pod is not None and pod.status is not None else None


def finished(core: CoreV1Api, namespace: str, name: str) -> V1Pod | None:
    """The pod once it has Succeeded or Failed."""
    pod = read_pod(core, namespace, name)
    done = pod is not None and pod.status is not None and pod.status.phase in status.TERMINAL
    return pod if done else None


def termination_message(pod: V1Pod) -> str:
    (container,) = (pod.status.container_statuses if pod.status else None) or []
    terminated = container.state.terminated if container.state else None
    assert terminated is not None, container
    assert terminated.exit_code == 0, terminated
    return str(terminated.message)


def running_pid(core: CoreV1Api, namespace: str, name: str) -> int | None:
    """The pid of the pod's running container, from its ``sluice://<pid>`` container id."""
    pod = read_pod(core, namespace, name)
    statuses = (pod.status.container_statuses if pod and pod.status else None) or []
    for container in statuses:
        if container.state and container.state.running and container.container_id:
            return int(container.container_id.removeprefix("sluice://"))
    return None


def test_scheduled_pod_reports_exit_code_and_termination_message(
    agent_stack: Layout, core: CoreV1Api, namespace: str
) -> None:
    script = """
        import sys
        with open("/dev/termination-log", "w") as log:
            log.write("checkpoint lost at offset 42")
        sys.exit(3)
    """
    started = time.monotonic()
    core.create_namespaced_pod(namespace, pod_manifest("exit-three", script))

    wait_for(
        lambda: phase(core, namespace, "exit-three") == status.FAILED,
        timeout=30,
        what="pod exit-three to fail",
    )
    print(f"pod create -> Failed: {time.monotonic() - started:.2f}s")

    pod = read_pod(core, namespace, "exit-three")
    assert pod is not None
    assert pod.spec is not None
    assert pod.status is not None
    assert pod.spec.node_name in nodeagent.NODES  # placed by kube-scheduler
    (container,) = pod.status.container_statuses or []
    terminated = container.state.terminated if container.state else None
    assert terminated is not None
    assert terminated.exit_code == 3
    assert terminated.reason == "Error"
    assert terminated.message == "checkpoint lost at offset 42"
    assert pod.status.host_ip == "127.0.0.1"
    assert pod.status.pod_ip == podnet.pod_ip(pod.metadata.uid)  # its own, not the host's


def test_delete_sends_sigterm_within_grace_then_removes_the_pod(
    agent_stack: Layout, core: CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    record = tmp_path / "signal.txt"
    script = f"""
        import signal, sys, time
        def on_signal(number, _frame):
            with open({str(record)!r}, "w") as out:
                out.write(signal.Signals(number).name)
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_signal)
        while True:
            time.sleep(0.05)
    """
    grace = 30
    manifest = pod_manifest("sleeper", script, terminationGracePeriodSeconds=grace)
    started = time.monotonic()
    core.create_namespaced_pod(namespace, manifest)
    pid = wait_for(
        lambda: running_pid(core, namespace, "sleeper"), timeout=30, what="sleeper running"
    )
    print(f"pod create -> Running: {time.monotonic() - started:.2f}s")

    deleting = time.monotonic()
    core.delete_namespaced_pod("sleeper", namespace)
    wait_for(
        lambda: read_pod(core, namespace, "sleeper") is None, timeout=grace, what="sleeper gone"
    )
    elapsed = time.monotonic() - deleting
    print(f"pod delete -> gone: {elapsed:.2f}s")

    assert record.read_text() == "SIGTERM"
    assert not procs.pid_alive(pid)
    assert elapsed < grace


def test_partitioned_node_goes_not_ready_while_its_process_runs_on(
    agent_stack: Layout, core: CoreV1Api, namespace: str, private_agent: PrivateAgent
) -> None:
    node = private_agent.node
    manifest = pod_manifest(
        "zombie",
        "import time\nwhile True: time.sleep(1)",
        nodeSelector={"kubernetes.io/hostname": node},
        tolerations=[private_agent.toleration()],
    )
    core.create_namespaced_pod(namespace, manifest)
    pid = wait_for(
        lambda: running_pid(core, namespace, "zombie"), timeout=30, what="zombie running"
    )

    partitioned = time.monotonic()
    control.partition(agent_stack, node, port=private_agent.port)
    wait_for(lambda: node_ready(core, node) == "Unknown", timeout=60, what=f"{node} NotReady")
    print(f"partition -> Ready=Unknown: {time.monotonic() - partitioned:.2f}s")
    assert procs.pid_alive(pid), "a partitioned node's process must keep running"
    assert phase(core, namespace, "zombie") == status.RUNNING

    healed = time.monotonic()
    control.heal(agent_stack, node, port=private_agent.port)
    wait_for(lambda: node_ready(core, node) == "True", timeout=30, what=f"{node} Ready")
    print(f"heal -> Ready=True: {time.monotonic() - healed:.2f}s")
    assert running_pid(core, namespace, "zombie") == pid


def test_crashed_node_kills_its_processes_and_reports_them_lost_after_heal(
    agent_stack: Layout, core: CoreV1Api, namespace: str, private_agent: PrivateAgent
) -> None:
    node = private_agent.node
    manifest = pod_manifest(
        "victim",
        "import time\nwhile True: time.sleep(1)",
        nodeSelector={"kubernetes.io/hostname": node},
        tolerations=[private_agent.toleration()],
    )
    core.create_namespaced_pod(namespace, manifest)
    pid = wait_for(
        lambda: running_pid(core, namespace, "victim"), timeout=30, what="victim running"
    )

    control.crash(agent_stack, node, port=private_agent.port)
    assert not procs.pid_alive(pid), "a crash SIGKILLs the node's processes at once"
    wait_for(lambda: node_ready(core, node) == "Unknown", timeout=60, what=f"{node} NotReady")

    control.heal(agent_stack, node, port=private_agent.port)
    wait_for(
        lambda: phase(core, namespace, "victim") == status.FAILED,
        timeout=30,
        what="victim to fail",
    )
    pod = read_pod(core, namespace, "victim")
    assert pod is not None
    assert pod.status is not None
    (container,) = pod.status.container_statuses or []
    terminated = container.state.terminated if container.state else None
    assert terminated is not None
    assert (terminated.exit_code, terminated.reason) == (137, "ContainerStatusUnknown")


def test_a_pod_with_only_args_runs_its_images_entrypoint_then_the_agents_default(
    agent_stack: Layout, core: CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    """Spark's executor pods have ``args: [executor]`` and rely on the image's
    ENTRYPOINT: argv = ENTRYPOINT + args, ``$(VAR)`` expanded in the args."""
    report = (
        "import json, os, sys; "
        "open(os.environ['SLUICE_TERMINATION_LOG'], 'w').write(json.dumps(sys.argv))"
    )
    own = tmp_path / "own"
    own.mkdir()
    (own / "image.entrypoint").write_text(json.dumps(["python", "-c", report]))
    derived = tmp_path / "derived"  # no entrypoint of its own: the job image's runs
    (derived / "sluice_job").mkdir(parents=True)
    (derived / "sluice_job" / "__init__.py").write_text("")  # shadows the real one
    (derived / "sluice_job" / "__main__.py").write_text(report.replace("; ", "\n"))
    tag = uuid.uuid4().hex[:8]
    for name, root in (("own", own), ("derived", derived)):
        nodeagent.register_image(agent_stack, f"sluice-test-{name}-{tag}:1", root)
        manifest = {
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "executor",
                        "image": f"sluice-test-{name}-{tag}:1",
                        "args": ["executor", "--pod", "$(POD_NAME)"],
                        "env": [
                            {
                                "name": "POD_NAME",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                            }
                        ],
                    }
                ],
            },
        }
        core.create_namespaced_pod(namespace, manifest)

    own_pod = wait_for(lambda: finished(core, namespace, "own"), timeout=30, what="own done")
    assert json.loads(termination_message(own_pod)) == ["-c", "executor", "--pod", "own"]
    derived_pod = wait_for(
        lambda: finished(core, namespace, "derived"), timeout=30, what="derived done"
    )
    argv = json.loads(termination_message(derived_pod))  # python -m sluice_job executor ...
    assert argv == [str(derived / "sluice_job" / "__main__.py"), "executor", "--pod", "derived"]


def test_two_pods_bind_the_same_port_each_on_its_own_ip(
    agent_stack: Layout, core: CoreV1Api, namespace: str
) -> None:
    """Two Spark drivers on one machine bind the same fixed ports on their pod IPs."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    script = f"""
        import os, socket
        server = socket.socket()
        server.bind((os.environ["POD_IP"], {port}))
        server.listen()
        while True:
            conn, _ = server.accept()
            conn.sendall(os.environ["POD_NAME"].encode())
            conn.close()
    """
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    names = ("driver-a", "driver-b")
    for name in names:
        manifest = pod_manifest(name, script)
        assert manifest.spec is not None
        manifest.spec.containers[0].env = env
        core.create_namespaced_pod(namespace, manifest)

    def answer(ip: str) -> str | None:
        with socket.create_connection((ip, port), timeout=2) as conn:
            return conn.recv(100).decode() or None

    def serving(name: str) -> str:
        """The pod's IP, once it runs and answers there with its name."""
        wait_for(lambda: running_pid(core, namespace, name), timeout=30, what=f"{name} running")
        pod = read_pod(core, namespace, name)
        assert pod is not None
        assert pod.status is not None
        assert pod.metadata is not None
        ip = str(pod.status.pod_ip)
        assert [entry.ip for entry in pod.status.pod_ips or []] == [ip]
        assert ip == podnet.pod_ip(str(pod.metadata.uid))
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.0.0/8")
        served = wait_for(
            lambda: answer(ip), timeout=30, what=f"{name} listening", ignoring=(OSError,)
        )
        assert served == name
        return ip

    ips = {name: serving(name) for name in names}
    assert ips["driver-a"] != ips["driver-b"]
    assert "127.0.0.1" not in ips.values()
    assert all(phase(core, namespace, name) == status.RUNNING for name in names)


def test_a_container_reaches_the_api_server_through_the_kubernetes_service_variables(
    agent_stack: Layout, core: CoreV1Api, namespace: str
) -> None:
    """What a Spark driver does with ``k8s://https://$(KUBERNETES_SERVICE_HOST):
    $(KUBERNETES_SERVICE_PORT)``: call the API server, trusting the pod's CA and token."""
    wait_default_service_account(core, namespace)
    script = """
        import json, os, ssl, sys, urllib.request
        secrets = os.path.dirname(os.environ["KUBECONFIG"])
        context = ssl.create_default_context(cafile=os.path.join(secrets, "ca.crt"))
        with open(os.path.join(secrets, "token")) as token:
            bearer = {"Authorization": "Bearer " + token.read()}
        request = urllib.request.Request(sys.argv[1] + "/version", headers=bearer)
        with urllib.request.urlopen(request, context=context, timeout=10) as reply:
            version = json.load(reply)["gitVersion"]
        with open("/dev/termination-log", "w") as out:
            json.dump({"master": sys.argv[1], "version": version}, out)
    """
    manifest = pod_manifest("spark-submit", script)
    assert manifest.spec is not None
    command = manifest.spec.containers[0].command
    assert command is not None
    command.append("https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)")
    core.create_namespaced_pod(namespace, manifest)

    pod = wait_for(
        lambda: finished(core, namespace, "spark-submit"), timeout=30, what="spark-submit done"
    )
    seen = json.loads(termination_message(pod))
    assert seen == {
        "master": core.api_client.configuration.host,
        "version": VersionApi(core.api_client).get_code().git_version,
    }


ENDPOINT_WARNINGS_WINDOW = 20.0
"""How long a Service over a running pod is watched for Warning Events: the endpoint
controllers, when they ran, sent their first Warnings within 10 s of the pod's start."""


def test_a_service_over_a_running_pod_raises_no_warning_events(
    agent_stack: Layout, core: CoreV1Api, namespace: str
) -> None:
    """What each pipeline's driver has: a headless Service selecting its pod, whose IP
    is a loopback address. The API server refuses loopback addresses in Endpoints and
    EndpointSlices, so the controller-manager's endpoint controllers, when they ran,
    failed on every sync with Warning Events ("may not be in the loopback range") that
    buried the operator's own in ``kubectl get events``."""
    manifest = pod_manifest("served", "import time\nwhile True: time.sleep(60)")
    assert manifest.metadata is not None
    manifest.metadata.labels = {"app": "served"}
    core.create_namespaced_pod(namespace, manifest)
    service = {
        "metadata": {"name": "served"},
        "spec": {"clusterIP": "None", "selector": {"app": "served"}, "ports": [{"port": 80}]},
    }
    core.create_namespaced_service(namespace, V1Service.model_validate(service))
    wait_for(lambda: running_pid(core, namespace, "served"), timeout=30, what="served running")

    deadline = time.monotonic() + ENDPOINT_WARNINGS_WINDOW
    while time.monotonic() < deadline:
        events = core.list_namespaced_event(namespace).items
        warnings = [f"{e.reason}: {e.message}" for e in events if e.type == "Warning"]
        assert warnings == [], "\n".join(warnings)
        time.sleep(0.5)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-s", "-v"]))
