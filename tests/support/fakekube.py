"""An in-memory Kubernetes API for the operator's unit tests, with failure switches.

It answers the calls ``sluice_operator.kube.Kube`` makes (pipelines through the
custom-objects API, pods, nodes, events, the supporting objects) from dictionaries,
and :meth:`FakeApi.fail` makes the next calls of one method fail the way a real API
server does: ``409`` (a conflict), ``500`` (a server error) or ``"timeout"`` (the
client's read timeout). Every call is recorded, so a test can count reads and writes.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ReadTimeoutError

from sluice_operator.kube import Kube

Failure = int | str


@dataclass
class FakeApi:
    pipelines: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pods: dict[tuple[str, str], client.V1Pod] = field(default_factory=dict)
    nodes: dict[str, client.V1Node] = field(default_factory=dict)
    events: list[client.CoreV1Event] = field(default_factory=list)
    created: list[tuple[str, str]] = field(default_factory=list)
    """Supporting objects created: (kind, name)."""
    objects: dict[tuple[str, str], Any] = field(default_factory=dict)
    """Supporting objects as created, by (kind, name): what a read after a 409 finds."""
    calls: Counter[str] = field(default_factory=Counter)
    _failures: dict[str, list[Failure]] = field(default_factory=dict)

    def fail(self, method: str, failure: Failure, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` fail with ``failure``."""
        self._failures.setdefault(method, []).extend([failure] * times)

    def kube(self) -> Kube:
        kube = Kube.__new__(Kube)
        kube.api = None  # type: ignore[assignment]
        kube.core = kube.rbac = kube.custom = self  # type: ignore[assignment]
        kube.ensured = {}
        return kube

    def _call(self, method: str) -> None:
        self.calls[method] += 1
        pending = self._failures.get(method)
        if not pending:
            return
        failure = pending.pop(0)
        if failure == "timeout":
            raise ReadTimeoutError(None, "/", "Read timed out. (read timeout=15.0)")  # type: ignore[arg-type]
        raise ApiException(status=int(failure), reason="injected")

    # -- custom objects ----------------------------------------------------------------

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, **_: Any
    ) -> dict[str, Any]:
        self._call("get_namespaced_custom_object")
        found = self.pipelines.get((namespace, name))
        if found is None:
            raise ApiException(status=404, reason="NotFound")
        return copy.deepcopy(found)

    def patch_namespaced_custom_object_status(
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        name: str,
        body: dict[str, Any],
        **_: Any,
    ) -> None:
        self._call("patch_namespaced_custom_object_status")
        status = self.pipelines[(namespace, name)].setdefault("status", {})
        for key, value in body["status"].items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = copy.deepcopy(value)

    # -- pods, nodes, events -------------------------------------------------------------

    def list_namespaced_pod(self, namespace: str, label_selector: str, **_: Any) -> Any:
        self._call("list_namespaced_pod")
        wanted = dict(pair.split("=", 1) for pair in label_selector.split(","))
        items = [
            pod
            for (ns, _name), pod in self.pods.items()
            if ns == namespace
            and all((pod.metadata.labels or {}).get(k) == v for k, v in wanted.items())
        ]
        return client.V1PodList(items=items)

    def create_namespaced_pod(self, namespace: str, body: client.V1Pod, **_: Any) -> None:
        self._call("create_namespaced_pod")
        key = (namespace, body.metadata.name)
        if key in self.pods:
            raise ApiException(status=409, reason="AlreadyExists")
        self.pods[key] = body

    def delete_namespaced_pod(self, name: str, namespace: str, **_: Any) -> None:
        self._call("delete_namespaced_pod")
        if self.pods.pop((namespace, name), None) is None:
            raise ApiException(status=404, reason="NotFound")

    def read_node(self, name: str, **_: Any) -> client.V1Node:
        self._call("read_node")
        if name not in self.nodes:
            raise ApiException(status=404, reason="NotFound")
        return self.nodes[name]

    def create_namespaced_event(self, namespace: str, body: client.CoreV1Event, **_: Any) -> None:
        self._call("create_namespaced_event")
        self.events.append(body)

    # -- the objects a driver needs --------------------------------------------------------

    def _create_object(self, kind: str, body: Any) -> None:
        try:
            self._call(f"create_{kind}")
        except ApiException as err:
            if err.status == 409:  # it exists (made by an earlier, unanswered call?)
                self.objects.setdefault((kind, body.metadata.name), body)
            raise
        self.created.append((kind, body.metadata.name))
        self.objects[(kind, body.metadata.name)] = body

    def _read_object(self, kind: str, name: str) -> Any:
        self._call(f"read_{kind}")
        found = self.objects.get((kind, name))
        if found is None:
            raise ApiException(status=404, reason="NotFound")
        return found

    def read_namespaced_service_account(self, name: str, namespace: str, **_: Any) -> Any:
        return self._read_object("service_account", name)

    def read_namespaced_service(self, name: str, namespace: str, **_: Any) -> Any:
        return self._read_object("service", name)

    def read_namespaced_role_binding(self, name: str, namespace: str, **_: Any) -> Any:
        return self._read_object("role_binding", name)

    def create_namespaced_service_account(self, namespace: str, body: Any, **_: Any) -> None:
        self._create_object("service_account", body)

    def create_namespaced_service(self, namespace: str, body: Any, **_: Any) -> None:
        self._create_object("service", body)

    def create_namespaced_role_binding(self, namespace: str, body: Any, **_: Any) -> None:
        self._create_object("role_binding", body)
