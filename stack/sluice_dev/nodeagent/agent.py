"""The per-node loop: watch the node's pods, run them, report them, and fake faults.

Each :class:`NodeAgent` plays one kubelet with three daemon threads: the informer
(list+watch of pods with ``spec.nodeName`` = the node), the heartbeat (node status and
Lease every ``heartbeat_seconds``) and the reconciler, which on every change or every
``poll_seconds`` makes each pod's local processes match the API and reports back:

* a new pod: start its containers, report Pending -> Running -> Succeeded/Failed;
* ``deletionTimestamp`` set: SIGTERM, SIGKILL after ``deletionGracePeriodSeconds``,
  report the final status, then delete the object (grace 0, uid precondition), as the
  kubelet's status manager does; a pod with nothing running is deleted at once;
* a process whose pod vanished from the API (force-deleted): stopped, no API call;
* a container that mounts its service-account token gets it as a kubeconfig
  (:mod:`sluice_dev.nodeagent.serviceaccount`), so it acts with the pod's RBAC;
* every container gets ``KUBERNETES_SERVICE_HOST``/``PORT`` naming the API server the
  agent uses (:mod:`sluice_dev.nodeagent.kubeservice`), and each pod its own IP
  (:mod:`sluice_dev.nodeagent.podnet`), reported in its status.

Faults: *partitioned* - no heartbeats and no API writes for this node (exits are
still noticed, nothing is started or restarted), processes keep running: a zombie.
*crashed* - every process of the node SIGKILLed and forgotten, no heartbeats. *heal*
resumes; after a crash the pods the API still shows as started are reported lost
(``ContainerStatusUnknown``) or restarted, per their restart policy. Every pass holds
the node's lock, so once :meth:`NodeAgent.set_fault` returns the node acts no more.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kubernetes.client import (
    ApiClient,
    CoordinationV1Api,
    CoreV1Api,
    V1Container,
    V1DeleteOptions,
    V1Pod,
    V1Preconditions,
)
from kubernetes.client.exceptions import ApiException

from sluice_dev.nodeagent import kubeservice, node, podnet, serviceaccount, status
from sluice_dev.nodeagent.clock import now
from sluice_dev.nodeagent.informer import PodInformer
from sluice_dev.nodeagent.podrun import ContainerFiles, Planner, PodRun
from sluice_dev.nodeagent.podspec import LaunchPlan, NodeDefaults, Placement, launch_plan
from sluice_dev.nodeagent.settings import Settings
from sluice_dev.nodeagent.sources import ApiSources

log = logging.getLogger(__name__)

TIMEOUT = 10.0
RESEND_SECONDS = 2.0
"""A status the API shows differently from ours (someone else wrote it) is re-sent
after this long; a status that changed here is sent at once."""
RETRY_SECONDS = 1.0
DEFAULT_GRACE = 30


class Fault(enum.StrEnum):
    READY = "ready"
    PARTITIONED = "partitioned"
    CRASHED = "crashed"


class NodeAgent:
    """One node: its registration, heartbeats, pods and fault switch."""

    def __init__(self, name: str, api: ApiClient, settings: Settings) -> None:
        self.name = name
        self._core = CoreV1Api(api)
        self._coord = CoordinationV1Api(api)
        self._server = serviceaccount.ApiServer(
            api.configuration.host, Path(api.configuration.ssl_ca_cert)
        )
        self._settings = settings
        self._defaults = NodeDefaults(
            base_env=settings.base_env,
            service_env=kubeservice.service_env(self._server.url),
            entrypoint=settings.default_entrypoint,
        )
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._informer = PodInformer(self._core, name, self._wake.set)
        self._runs: dict[str, PodRun] = {}
        self._rejected: set[str] = set()
        self._deleted: set[str] = set()
        self._fault = Fault.READY
        self._ready_since = now()

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        for target, role in (
            (lambda: self._informer.run(self._stop), "informer"),
            (self._heartbeat_loop, "heartbeat"),
            (self._reconcile_loop, "reconciler"),
        ):
            threading.Thread(target=target, name=f"{self.name}-{role}", daemon=True).start()

    def begin_shutdown(self, grace: float) -> None:
        """Stop acting on the API; SIGTERM every process (SIGKILL after ``grace``)."""
        self._stop.set()
        with self._lock:
            for run in self._runs.values():
                run.stop(min(grace, _grace(run.pod)))

    def finish_shutdown(self, deadline: float) -> bool:
        """Reap until ``deadline`` (monotonic), then SIGKILL; True when all are gone."""
        with self._lock:
            for run in self._runs.values():
                run.step(_no_start)
                if time.monotonic() >= deadline:
                    run.kill()
            return all(run.finished for run in self._runs.values())

    # -- faults ----------------------------------------------------------------------

    @property
    def fault(self) -> Fault:
        return self._fault

    def set_fault(self, fault: Fault) -> None:
        with self._lock:
            if fault is Fault.CRASHED:
                for run in self._runs.values():
                    run.kill()
                self._runs.clear()
                self._rejected.clear()
            if fault is Fault.READY and self._fault is not Fault.READY:
                self._ready_since = now()
            self._fault = fault
            log.info("node %s is now %s", self.name, fault)
        self._wake.set()

    def processes(self) -> list[dict[str, Any]]:
        """The local processes of this node's pods (for tests: which pid is whose)."""
        with self._lock:
            return [
                {
                    "node": self.name,
                    "namespace": _meta(run.pod, "namespace"),
                    "pod": _meta(run.pod, "name"),
                    "uid": uid,
                    "container": view.name,
                    "pid": view.pid,
                    "phase": status.phase(run.views()),
                    "exit_code": (
                        view.state.exit_code if isinstance(view.state, status.Terminated) else None
                    ),
                }
                for uid, run in self._runs.items()
                for view in run.views()
            ]

    # -- heartbeat ---------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        uid: str | None = None
        while not self._stop.is_set():
            if self._fault is Fault.READY:
                try:
                    if uid is None:
                        uid = node.register(
                            self._core, self.name, self._settings.taints, self._settings.labels
                        )
                    node.heartbeat(self._core, self._coord, self.name, uid, self._ready_since)
                except ApiException as err:
                    uid = None if err.status == 404 else uid
                    log.warning("heartbeat of %s failed: %s %s", self.name, err.status, err.reason)
                except Exception as err:  # the API may be down; keep trying
                    log.warning("heartbeat of %s failed: %r", self.name, err)
            self._stop.wait(self._settings.heartbeat_seconds if uid else 0.5)

    # -- reconcile -------------------------------------------------------------------

    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._settings.poll_seconds)
            self._wake.clear()
            try:
                with self._lock:
                    if not self._stop.is_set():
                        self._pass()
            except Exception:
                log.exception("reconcile pass of %s failed", self.name)

    def _pass(self) -> None:
        if self._fault is not Fault.READY:
            for run in self._runs.values():
                run.reap()
            return
        pods = self._informer.snapshot()
        if pods is None:
            return
        for pod in pods.values():
            self._sync(pod)
        for uid in set(self._runs) - set(pods):
            self._orphan(uid)
        self._rejected &= set(pods)
        self._deleted &= set(pods)

    def _sync(self, pod: V1Pod) -> None:
        uid = _meta(pod, "uid")
        run = self._runs.get(uid)
        if pod.metadata is not None and pod.metadata.deletion_timestamp is not None:
            self._terminate(pod, run)
            return
        if run is None:
            run = self._admit(pod)
            if run is None:
                return
        run.pod = pod
        run.step(self._planner(pod))
        self._report(run)

    def _admit(self, pod: V1Pod) -> PodRun | None:
        """A PodRun for a pod seen for the first time, or None if it is not to run."""
        uid = _meta(pod, "uid")
        phase = pod.status.phase if pod.status else None
        if phase in status.TERMINAL or uid in self._rejected or pod.spec is None:
            return None
        if pod.spec.init_containers:
            self._reject(pod, "init containers are not supported by the Sluice node agent")
            return None
        pod_dir = self._settings.pod_dir(_meta(pod, "namespace"), _meta(pod, "name"), uid)
        run = PodRun(pod, pod_dir, lost=_started(pod))
        self._runs[uid] = run
        log.info("admitted pod %s/%s on %s", _meta(pod, "namespace"), _meta(pod, "name"), self.name)
        return run

    def _terminate(self, pod: V1Pod, run: PodRun | None) -> None:
        uid = _meta(pod, "uid")
        if uid in self._deleted:
            return  # deleted by us; a finalizer holds the object
        if run is not None:
            run.pod = pod
            run.stop(_grace(pod))
            run.step(_no_start)
            if not run.finished:
                return
            if run.ever_started:
                self._report(run, force=True)
        if self._delete(pod):
            self._runs.pop(uid, None)
            self._deleted.add(uid)

    def _orphan(self, uid: str) -> None:
        run = self._runs[uid]
        run.stop(_grace(run.pod))
        run.step(_no_start)
        if run.finished:
            del self._runs[uid]

    def _planner(self, pod: V1Pod) -> Planner:
        sources = ApiSources(self._core, _meta(pod, "namespace"))

        def plan(container: V1Container, files: ContainerFiles) -> LaunchPlan:
            place = Placement(
                code_root=self._settings.images.resolve(container.image or ""),
                scratch=files.root,
                termination_log=files.termination_log,
            )
            launch = launch_plan(pod, container, self._defaults, place, sources)
            credentials = files.root / "serviceaccount"
            return serviceaccount.mount(
                self._core, self._server, pod, container, credentials, launch
            )

        return plan

    # -- API writes ------------------------------------------------------------------

    def _report(self, run: PodRun, *, force: bool = False) -> None:
        mono = time.monotonic()
        views = run.views()
        run.conditions = status.conditions(views, run.conditions, now())
        ip = podnet.pod_ip(_meta(run.pod, "uid"))
        patch = status.status_patch(views, run.conditions, run.started_at, podnet.HOST_IP, ip)
        if mono < run.retry_at and not force:
            return
        observed = run.pod.status.to_dict(serialize=True) if run.pod.status else {}
        drifted = status.digest(patch["status"]) != status.digest(observed)
        settled = not drifted or mono - run.last_sent < RESEND_SECONDS
        if patch == run.last_patch and settled and not force:
            return
        if self._patch_status(run.pod, patch):
            if patch != run.last_patch:
                log.info(
                    "pod %s/%s: %s",
                    _meta(run.pod, "namespace"),
                    _meta(run.pod, "name"),
                    _summary(views),
                )
            run.last_patch, run.last_sent = patch, mono
        else:
            run.retry_at = mono + RETRY_SECONDS

    def _reject(self, pod: V1Pod, message: str) -> None:
        patch = {"status": {"phase": status.FAILED, "reason": "Unsupported", "message": message}}
        if self._patch_status(pod, patch):
            self._rejected.add(_meta(pod, "uid"))

    def _patch_status(self, pod: V1Pod, patch: Mapping[str, Any]) -> bool:
        try:
            self._core.patch_namespaced_pod_status(
                _meta(pod, "name"),
                _meta(pod, "namespace"),
                dict(patch),
                _content_type=node.STRATEGIC,
                _request_timeout=TIMEOUT,
            )
        except ApiException as err:
            if err.status == 404:
                return True
            log.warning("status of pod %s failed: %s %s", _meta(pod, "name"), err.status, err.body)
            return False
        return True

    def _delete(self, pod: V1Pod) -> bool:
        """Remove the pod object for good; True when it is gone."""
        options = V1DeleteOptions(
            grace_period_seconds=0, preconditions=V1Preconditions(uid=_meta(pod, "uid"))
        )
        try:
            self._core.delete_namespaced_pod(
                _meta(pod, "name"), _meta(pod, "namespace"), body=options, _request_timeout=TIMEOUT
            )
        except ApiException as err:
            if err.status in (404, 409):
                return True
            log.warning(
                "delete of pod %s failed: %s %s", _meta(pod, "name"), err.status, err.reason
            )
            return False
        log.info("deleted pod %s/%s", _meta(pod, "namespace"), _meta(pod, "name"))
        return True


class Agent:
    """Every node of one agent process."""

    def __init__(self, nodes: Iterable[NodeAgent]) -> None:
        self.nodes = {n.name: n for n in nodes}

    def start(self) -> None:
        for each in self.nodes.values():
            each.start()

    def act(self, name: str, action: str) -> str:
        """``partition``/``crash``/``heal`` node ``name``; its new state. KeyError/ValueError."""
        faults = {"partition": Fault.PARTITIONED, "crash": Fault.CRASHED, "heal": Fault.READY}
        if action not in faults:
            raise ValueError(f"unknown action {action!r}; known: {sorted(faults)}")
        target = self.nodes[name]
        target.set_fault(faults[action])
        return str(target.fault)

    def states(self) -> dict[str, str]:
        return {name: str(each.fault) for name, each in self.nodes.items()}

    def processes(self) -> list[dict[str, Any]]:
        return [p for each in self.nodes.values() for p in each.processes()]

    def shutdown(self, grace: float) -> None:
        """SIGTERM every pod process, SIGKILL what outlives ``grace``, reap all."""
        for each in self.nodes.values():
            each.begin_shutdown(grace)
        deadline = time.monotonic() + grace
        while not all([each.finish_shutdown(deadline) for each in self.nodes.values()]):
            time.sleep(0.1)


def _summary(views: list[status.ContainerView]) -> str:
    def one(view: status.ContainerView) -> str:
        state = view.state
        if isinstance(state, status.Terminated):
            return f"{view.name}=exited({state.exit_code})"
        if isinstance(state, status.Waiting):
            return f"{view.name}=waiting({state.reason})"
        return f"{view.name}=running(pid {view.pid})"

    return f"{status.phase(views)} [{', '.join(one(v) for v in views)}]"


def _no_start(container: V1Container, files: ContainerFiles) -> LaunchPlan:
    raise AssertionError("nothing starts while a pod stops")


def _grace(pod: V1Pod) -> float:
    meta, spec = pod.metadata, pod.spec
    if meta is not None and meta.deletion_grace_period_seconds is not None:
        return float(meta.deletion_grace_period_seconds)
    if spec is not None and spec.termination_grace_period_seconds is not None:
        return float(spec.termination_grace_period_seconds)
    return float(DEFAULT_GRACE)


def _started(pod: V1Pod) -> bool:
    """Whether the API shows the pod already started (by an earlier incarnation)."""
    if pod.status is None:
        return False
    if pod.status.phase == status.RUNNING:
        return True
    return any(
        s.restart_count or (s.state is not None and (s.state.running or s.state.terminated))
        for s in pod.status.container_statuses or ()
    )


def _meta(pod: V1Pod, field: str) -> str:
    return str(getattr(pod.metadata, field, None) or "")
