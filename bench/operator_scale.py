"""``make bench-operator``: one operator, many pipelines, on the local control plane.

``--pipelines`` (100) StreamingPipelines are created at once in a fresh namespace,
their drivers the stand-in of the operator tests (a Python process that runs until
SIGTERM, on the stack's two node-agent nodes), watched by one operator process
(``python -m sluice_operator --namespace NS``). Then the image of every pipeline is
changed at once (a clean-stop upgrade each). The bench watches pods and pipelines
itself and reports, per phase:

* create (or change) -> the driver pod of the new epoch exists: p50 and p99, seconds
  (the time the bench's own pod watch saw it, minus the time the bench's call that
  created or changed the pipeline returned);
* create (or change) -> the pipeline is Running with that epoch: p50 and p99;
* the operator's resident memory at the end of the phase and the CPU seconds it used
  during it (``/proc``), and the API requests it made (the audit log).

Figures against the targets of the issue (create -> pod p99 <= 2 s, RSS <= 200 MB) are
printed as ratios, never asserted; results go to ``bench/results/operator-<stamp>``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from sluice_api import names
from sluice_dev import audit, localcluster
from sluice_dev.kubectl import Kubectl, KubectlError
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.servers import kube, nodeagent
from sluice_dev.stack import up

GROUP, VERSION, PLURAL = "sluice.dev", "v1alpha1", "streamingpipelines"
STANDIN_IMAGE = "sluice-test/standin"
STANDIN_ROOT = REPO_ROOT / "tests" / "support" / "standin"
RESULTS = REPO_ROOT / "bench" / "results"
POD_TARGET_SECONDS = 2.0
RSS_TARGET_MB = 200.0


@dataclass
class Phase:
    name: str
    to_pod: list[float] = field(default_factory=list)
    to_running: list[float] = field(default_factory=list)
    rss_mb: float = 0.0
    cpu_seconds: float = 0.0
    api_reads: int = 0
    api_writes: int = 0
    seconds: float = 0.0


class Watcher:
    """When each pipeline's pod of an epoch appeared, and when it was Running at it."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.pods: dict[tuple[str, int], float] = {}
        self.running: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch_pods, daemon=True),
            threading.Thread(target=self._watch_pipelines, daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch_pods(self) -> None:
        core = client.CoreV1Api()
        selector = f"{names.LABEL_ROLE}={names.ROLE_DRIVER}"
        while not self._stop.is_set():
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                core.list_namespaced_pod,
                self.namespace,
                label_selector=selector,
                timeout_seconds=30,
            )
            for event in stream:
                labels = event["object"].metadata.labels or {}
                key = (labels[names.LABEL_PIPELINE], int(labels[names.LABEL_EPOCH]))
                self.pods.setdefault(key, time.monotonic())

    def _watch_pipelines(self) -> None:
        custom = client.CustomObjectsApi()
        while not self._stop.is_set():
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                self.namespace,
                PLURAL,
                timeout_seconds=30,
            )
            for event in stream:
                body = event["object"]
                status = body.get("status") or {}
                if status.get("phase") == "Running":
                    key = (body["metadata"]["name"], int(status.get("epoch", 0)))
                    self.running.setdefault(key, time.monotonic())


def standin_spec(image: str) -> dict[str, Any]:
    return {
        "image": image,
        "source": {"kafka": {"bootstrapServers": "127.0.0.1:1", "topics": ["unused"]}},
        "transform": {"entrypoint": "sluice_job.examples.events:transform"},
        "sink": {"cassandra": {"contactPoints": ["127.0.0.1:1"], "keyspace": "k", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["127.0.0.1:1"]}},
        "spark": {"driver": {"cores": 1, "memory": "512m"}, "executors": {"instances": 0}},
        "upgrade": {"stopTimeoutSeconds": 10},
    }


def _gone(custom: client.CustomObjectsApi, namespace: str, name: str) -> bool:
    try:
        custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except client.exceptions.ApiException as err:
        if err.status == 404:
            return True
        raise
    return False


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def proc_usage(pid: int) -> tuple[float, float]:
    """(resident MB, CPU seconds used so far) of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss_kb / 1024, (int(fields[11]) + int(fields[12])) / ticks


def run_phase(
    name: str,
    watcher: Watcher,
    operator: subprocess.Popen[bytes],
    layout: Layout,
    pipelines: Sequence[str],
    epoch: int,
    act: Callable[[str], object],
    timeout: float,
    gone: Callable[[str], bool] | None = None,
) -> Phase:
    """Do ``act`` to every pipeline at once; wait until each is Running at ``epoch``
    (or, with ``gone``, until ``gone`` says it no longer exists)."""
    phase = Phase(name)
    _, cpu_before = proc_usage(operator.pid)
    since = datetime.now(UTC)
    started: dict[str, float] = {}
    began = time.monotonic()

    def one(pipeline: str) -> None:
        act(pipeline)
        started[pipeline] = time.monotonic()

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, pipelines))
    deadline = time.monotonic() + timeout
    finished: dict[str, float] = {}
    while time.monotonic() < deadline and len(finished) < len(pipelines):
        for p in pipelines:
            if p in finished:
                continue
            if gone is not None and gone(p):
                finished[p] = time.monotonic()
            elif gone is None and (p, epoch) in watcher.running:
                finished[p] = watcher.running[p, epoch]
        time.sleep(0.2)  # polling the watcher's maps, which fill from watch threads
    phase.seconds = time.monotonic() - began
    if gone is not None:
        phase.to_running = [finished[p] - started[p] for p in finished]
    for pipeline in pipelines:
        if (pipeline, epoch) in watcher.pods:
            phase.to_pod.append(watcher.pods[pipeline, epoch] - started[pipeline])
        if (pipeline, epoch) in watcher.running:
            phase.to_running.append(watcher.running[pipeline, epoch] - started[pipeline])
    phase.rss_mb, cpu_after = proc_usage(operator.pid)
    phase.cpu_seconds = cpu_after - cpu_before
    calls = audit.requests(kube.audit_log(layout), since, datetime.now(UTC), "sluice-operator")
    phase.api_writes = sum(1 for c in calls if c.writes)
    phase.api_reads = len(calls) - phase.api_writes
    return phase


def report(phases: Sequence[Phase], count: int) -> str:
    lines = [
        f"# Operator at scale: {count} pipelines, one operator",
        "",
        "| phase | pipelines | -> pod p50 | -> pod p99 | -> Running (delete: gone) p50 | p99 "
        "| operator RSS | operator CPU | API reads | API writes | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in phases:
        reached = "gone" if p.name == "delete" else "Running"
        lines.append(
            f"| {p.name} | {len(p.to_running)}/{count} {reached} "
            f"| {percentile(p.to_pod, 0.5):.2f} s | {percentile(p.to_pod, 0.99):.2f} s "
            f"| {percentile(p.to_running, 0.5):.2f} s | {percentile(p.to_running, 0.99):.2f} s "
            f"| {p.rss_mb:.0f} MB | {p.cpu_seconds:.1f} s | {p.api_reads} | {p.api_writes} "
            f"| {p.seconds:.1f} s |"
        )
    create = phases[0]
    lines += [
        "",
        f"create -> pod p99 / target {POD_TARGET_SECONDS:.0f} s: "
        f"{percentile(create.to_pod, 0.99) / POD_TARGET_SECONDS:.2f}",
        f"operator RSS / target {RSS_TARGET_MB:.0f} MB: "
        f"{max(p.rss_mb for p in phases) / RSS_TARGET_MB:.2f}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.operator_scale")
    parser.add_argument("--pipelines", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    layout = Layout.from_env()
    up(layout, [kube.APISERVER, kube.CONTROLLER_MANAGER, kube.SCHEDULER, nodeagent.NAME])
    nodeagent.register_image(layout, STANDIN_IMAGE, STANDIN_ROOT)
    kubectl = Kubectl(layout)
    localcluster.install_crd(kubectl)
    config.load_kube_config(config_file=str(layout.kubeconfig))  # type: ignore[no-untyped-call]
    namespace = f"bench-operator-{int(time.time())}"
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": namespace}}))
    log = RESULTS / f"operator-{namespace}.log"
    RESULTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KUBECONFIG": str(layout.kubeconfig)}
    with log.open("wb") as out:
        operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluice_operator",
                f"--namespace={namespace}",
                "--no-leader-election",
                "--http-port=0",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    watcher = Watcher(namespace)
    watcher.start()
    pipelines = [f"p{i:03d}" for i in range(args.pipelines)]
    try:
        time.sleep(5)  # the operator starts and lists before the burst (a bench, not a test)
        phases = [
            run_phase(
                "create",
                watcher,
                operator,
                layout,
                pipelines,
                1,
                lambda name: custom.create_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    {
                        "apiVersion": f"{GROUP}/{VERSION}",
                        "kind": "StreamingPipeline",
                        "metadata": {"name": name},
                        "spec": standin_spec(f"{STANDIN_IMAGE}:v1"),
                    },
                ),
                args.timeout,
            ),
            run_phase(
                "spec change",
                watcher,
                operator,
                layout,
                pipelines,
                2,
                lambda name: custom.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    {"spec": {"image": f"{STANDIN_IMAGE}:v2"}},
                ),
                args.timeout,
            ),
        ]
        phases.append(
            run_phase(
                "delete",
                watcher,
                operator,
                layout,
                pipelines,
                -1,
                lambda name: custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name
                ),
                args.timeout,
                gone=lambda name: _gone(custom, namespace, name),
            )
        )
    finally:
        watcher.stop()
        operator.terminate()
        operator.wait(30)
        with contextlib.suppress(KubectlError):
            kubectl("delete", "namespace", namespace, "--wait=false")
    text = report(phases, args.pipelines)
    print(text)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"operator-{stamp}.md").write_text(text + "\n")
    (RESULTS / f"operator-{stamp}.json").write_text(
        json.dumps([asdict(p) for p in phases], indent=2) + "\n"
    )
    log.unlink(missing_ok=True)
    return 0 if all(len(p.to_running) == args.pipelines for p in phases) else 1


if __name__ == "__main__":
    sys.exit(main())
