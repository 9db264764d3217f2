"""The operator's Kubernetes I/O: reading pipelines, driver pods and nodes into the
plain values of ``model``, and performing the actions ``decide`` returns.

Uses the official ``kubernetes`` client (synchronous; kopf runs sync handlers in a
thread pool). Creation is idempotent (409 means it already exists), deletion
tolerates 404, and the status is written with a merge patch on the status
subresource, so every action can safely be repeated by a restarted operator.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sluice_api import env as env_names
from sluice_api.status import bounded
from sluice_operator import naming
from sluice_operator.actions import (
    Action,
    CreatePod,
    Emit,
    EnsureObjects,
    RemovePod,
    StopPod,
    WriteStatus,
)
from sluice_operator.consent import SecretMeta
from sluice_operator.envfrom import Kind, Source
from sluice_operator.model import NodeView, PodPhase, PodView

LOG = logging.getLogger("sluice_operator")
MERGE: Final = "application/merge-patch+json"
TIMEOUT: Final = 15.0
USER_AGENT: Final = "sluice-operator"
EVENT_MESSAGE_MAX: Final = 1000
"""An Event's message is cut to this (with how much was cut): drivers' words reach it."""
SECRET_TABLE: Final = {"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}
"""Asks the API server for a Secret as ``kubectl get`` prints it: a Table whose row
holds its type and whose object is its metadata only (``consent`` reads a Secret's
type, labels and annotations this way, so a Secret's data never reaches the
operator)."""
CONNECTIONS: Final = 32
"""HTTP connections to the API server: one per reconcile thread (handlers.py), so a
burst of pipelines does not queue for the client's default handful."""


class NotOwnedError(RuntimeError):
    """An object the operator makes for a pipeline exists and is not that pipeline's."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(
            f"{kind} {name!r} exists and is not this pipeline's (no owner reference to it): "
            "the operator does not adopt it; rename the pipeline, or delete the object if "
            "it is a deleted pipeline's that garbage collection has not removed yet"
        )
        self.kind, self.name = kind, name


def _owner_uids(found: Any) -> set[str]:
    """The uids of an object's owner references (a client model or a metadata dict)."""
    if isinstance(found, Mapping):
        return {str(ref.get("uid")) for ref in found.get("ownerReferences") or []}
    return {str(ref.uid) for ref in found.metadata.owner_references or []}


def table_metadata(table: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of the one object a Table reply holds (``includeObject=Metadata``,
    the API server's default)."""
    row = (table.get("rows") or [{}])[0]
    return dict((row.get("object") or {}).get("metadata") or {})


def secret_meta(table: Mapping[str, Any]) -> SecretMeta:
    """A Secret's metadata and type from its :data:`SECRET_TABLE` reply."""
    columns = [c.get("name") for c in table.get("columnDefinitions") or []]
    cells = ((table.get("rows") or [{}])[0]).get("cells") or []
    kind = cells[columns.index("Type")] if "Type" in columns else None
    metadata = table_metadata(table)
    return SecretMeta(
        dict(metadata.get("labels") or {}),
        dict(metadata.get("annotations") or {}),
        str(kind) if kind else "Opaque",
    )


def object_keys(found: Mapping[str, Any]) -> tuple[str, ...]:
    """The key names of a ConfigMap (``data`` and ``binaryData``) or a Secret
    (``data``), without their values."""
    return tuple(dict.fromkeys([*(found.get("data") or {}), *(found.get("binaryData") or {})]))


class Kube:
    def __init__(self, api: client.ApiClient | None = None) -> None:
        self.api = api or client.ApiClient()
        self.core = client.CoreV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.ensured: dict[str, int] = {}
        """Pipelines (uids) whose supporting objects this process has created, with how
        many (a pipeline that gains executors needs more); a refused driver pod forgets its
        pipeline, so the next start checks again."""

    @classmethod
    def from_environment(cls) -> Kube:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        configuration = client.Configuration.get_default_copy()
        configuration.connection_pool_maxsize = CONNECTIONS
        api = client.ApiClient(configuration)
        api.user_agent = USER_AGENT  # the operator's calls, told apart in audit logs
        return cls(api)

    # -- observe ---------------------------------------------------------------

    def namespace_uid(self, name: str) -> str:
        """The UID of Namespace ``name`` (``kube-system``'s names the cluster)."""
        found = self.core.read_namespace(name)
        return str(found.metadata.uid if found.metadata else "")

    def pipeline(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pipeline as stored now (kopf's copy may predate our last status write)."""
        try:
            found = self.custom.get_namespaced_custom_object(
                naming.GROUP,
                naming.VERSION,
                namespace,
                naming.PLURAL,
                name,
                _request_timeout=TIMEOUT,
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return cast(dict[str, Any], found)

    def driver_pods(self, namespace: str, pipeline: str) -> tuple[PodView, ...]:
        selector = ",".join(f"{k}={v}" for k, v in naming.selector(pipeline).items())
        pods = self.core.list_namespaced_pod(
            namespace, label_selector=selector, _request_timeout=TIMEOUT
        )
        return tuple(pod_view(p) for p in pods.items)

    def nodes(self, names: Iterable[str]) -> dict[str, NodeView]:
        result = {}
        for name in set(names):
            try:
                node = self.core.read_node(name, _request_timeout=TIMEOUT)
            except ApiException as err:
                if err.status == 404:
                    continue
                raise
            result[name] = node_view(node)
        return result

    def secret_metadata(self, namespace: str, names: Iterable[str]) -> dict[str, SecretMeta | None]:
        """Each named Secret's labels and annotations (its metadata only: never its data),
        ``None`` for one that does not exist."""
        result: dict[str, SecretMeta | None] = {}
        for name in dict.fromkeys(names):
            try:
                reply = self.core.read_namespaced_secret(
                    name,
                    namespace,
                    _headers=SECRET_TABLE,
                    _preload_content=False,
                    _request_timeout=TIMEOUT,
                )
            except ApiException as err:
                if err.status == 404:
                    result[name] = None
                    continue
                raise
            raw = cast(Any, reply).data  # the HTTP response: _preload_content=False
            result[name] = secret_meta(json.loads(raw))
        return result

    def env_keys(
        self, namespace: str, named: Iterable[Source]
    ) -> dict[tuple[Kind, str], tuple[str, ...] | None]:
        """The key names of each ConfigMap and Secret ``envFrom`` names, ``None`` for
        one that does not exist. No form of a Secret holds its key names without its
        values, so it is read whole (raw JSON, no client model) and only the names of
        ``data`` are kept: its values are never kept, logged or returned."""
        result: dict[tuple[Kind, str], tuple[str, ...] | None] = {}
        for source in named:
            found = (source.kind, source.name)
            if found in result:
                continue
            read = (
                self.core.read_namespaced_config_map
                if source.kind is Kind.CONFIG_MAP
                else self.core.read_namespaced_secret
            )
            try:
                reply = read(
                    source.name, namespace, _preload_content=False, _request_timeout=TIMEOUT
                )
            except ApiException as err:
                if err.status == 404:
                    result[found] = None
                    continue
                raise
            result[found] = object_keys(json.loads(cast(Any, reply).data))
        return result

    # -- act -------------------------------------------------------------------

    def apply(self, namespace: str, pipeline: str, action: Action, uid: str | None = None) -> None:
        """Carry out ``action`` for the pipeline ``namespace/pipeline``; its ``uid``
        ties Events to the object, as ``kubectl describe`` looks them up."""
        match action:
            case WriteStatus(status):
                self.custom.patch_namespaced_custom_object_status(
                    naming.GROUP,
                    naming.VERSION,
                    namespace,
                    naming.PLURAL,
                    pipeline,
                    {"status": status.to_patch()},
                    _content_type=MERGE,
                    _request_timeout=TIMEOUT,
                )
            case EnsureObjects(manifests):
                if uid is not None and self.ensured.get(uid) == len(manifests):
                    return  # created by this process already (409s cost a write each)
                for manifest in manifests:
                    self.ensure(manifest)
                if uid is not None:
                    self.ensured[uid] = len(manifests)
            case CreatePod(manifest):
                self._create(
                    lambda: self.core.create_namespaced_pod(
                        namespace, client.V1Pod.model_validate(manifest), _request_timeout=TIMEOUT
                    )
                )
            case StopPod(name):
                self._delete_pod(namespace, name, grace=None)
            case RemovePod(name):
                self._delete_pod(namespace, name, grace=0)
            case Emit(kind, reason, message):
                self.event(namespace, pipeline, kind, reason, message, uid)

    def ensure(self, manifest: Mapping[str, Any]) -> None:
        """Create ``manifest``'s object; one that exists already is adopted only if it
        is owned by the same pipeline (its uid among the owner references), else
        :class:`NotOwnedError`: a ServiceAccount, RoleBinding or Secret of that name
        made by anyone else would lend its identity (cloud workload identity
        included) or its rights to the pipeline."""
        namespace = manifest["metadata"]["namespace"]
        name, kind = manifest["metadata"]["name"], manifest["kind"]
        create: Any
        read: Any
        if kind == "ServiceAccount":
            body: Any = client.V1ServiceAccount.model_validate(manifest)
            create = self.core.create_namespaced_service_account
            read = self.core.read_namespaced_service_account
        elif kind == "Service":
            body = client.V1Service.model_validate(manifest)
            create, read = self.core.create_namespaced_service, self.core.read_namespaced_service
        elif kind == "Secret":
            body = client.V1Secret.model_validate({**manifest, "data": fresh_secret()})
            create, read = self.core.create_namespaced_secret, self._secret_metadata
        elif kind == "RoleBinding":
            body = client.V1RoleBinding.model_validate(manifest)
            create = self.rbac.create_namespaced_role_binding
            read = self.rbac.read_namespaced_role_binding
        else:
            raise ValueError(f"cannot ensure a {kind}")
        try:
            create(namespace, body, _request_timeout=TIMEOUT)
        except ApiException as err:
            if err.status != 409:
                raise
            owners = _owner_uids(read(name, namespace, _request_timeout=TIMEOUT))
            wanted = {ref["uid"] for ref in manifest["metadata"].get("ownerReferences", [])}
            if wanted and not wanted & owners:
                raise NotOwnedError(kind, name) from None

    def _secret_metadata(self, name: str, namespace: str, **kwargs: Any) -> Mapping[str, Any]:
        """A Secret's metadata (its Table form: never its data)."""
        reply = self.core.read_namespaced_secret(
            name, namespace, _headers=SECRET_TABLE, _preload_content=False, **kwargs
        )
        return table_metadata(json.loads(cast(Any, reply).data))

    def event(
        self,
        namespace: str,
        pipeline: str,
        kind: str,
        reason: str,
        message: str,
        uid: str | None = None,
    ) -> None:
        now = datetime.now(UTC)
        owner = {"uid": uid} if uid else {}
        body = client.CoreV1Event.model_validate(
            {
                "metadata": {"generateName": f"{pipeline}.", "namespace": namespace},
                "involvedObject": {
                    "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
                    "kind": naming.KIND,
                    "name": pipeline,
                    "namespace": namespace,
                    **owner,
                },
                "type": kind,
                "reason": reason,
                "message": bounded(message, EVENT_MESSAGE_MAX),
                "source": {"component": naming.MANAGED_BY},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )
        try:
            self.core.create_namespaced_event(namespace, body, _request_timeout=TIMEOUT)
        except ApiException as err:  # events are best effort; the status is the record
            LOG.warning(
                "event %s on %s/%s not recorded: %s", reason, namespace, pipeline, err.reason
            )

    def _create(self, call: Any) -> None:
        try:
            call()
        except ApiException as err:
            if err.status != 409:
                raise

    def _delete_pod(self, namespace: str, name: str, grace: int | None) -> None:
        try:
            self.core.delete_namespaced_pod(
                name, namespace, grace_period_seconds=grace, _request_timeout=TIMEOUT
            )
        except ApiException as err:
            if err.status != 404:
                raise


def fresh_secret() -> dict[str, str]:
    """A new Spark RPC secret (256 random bits, hex as Spark makes its own), as a
    Secret's ``data``."""
    value = secrets.token_hex(32).encode()
    return {env_names.SPARK_AUTH_SECRET_KEY: base64.b64encode(value).decode()}


def pod_view(pod: Any) -> PodView:
    meta, status = pod.metadata, pod.status
    labels = meta.labels or {}
    container = next(iter(status.container_statuses or []), None) if status else None
    exit_code, message, running_since, finished_at = None, "", None, None
    if container is not None and container.state is not None:
        if container.state.terminated is not None:
            exit_code = container.state.terminated.exit_code
            message = container.state.terminated.message or container.state.terminated.reason or ""
            finished_at = container.state.terminated.finished_at
        if container.state.running is not None:
            running_since = container.state.running.started_at
    phase = PodPhase(status.phase) if status and status.phase else PodPhase.PENDING
    waiting, waiting_message = _waiting(status, container)
    return PodView(
        name=meta.name,
        epoch=int(labels.get(naming.LABEL_EPOCH, "0")),
        phase=phase,
        node=pod.spec.node_name if pod.spec else None,
        deleting=meta.deletion_timestamp is not None,
        exit_code=exit_code,
        message=message,
        running_since=running_since,
        finished_at=finished_at,
        ip=status.pod_ip if status else None,
        created_at=meta.creation_timestamp,
        waiting=waiting,
        waiting_message=waiting_message,
        control=_serves_control(pod),
    )


def _serves_control(pod: Any) -> bool:
    """Whether a container of ``pod`` names the standby's control port."""
    containers = (pod.spec.containers if pod.spec else None) or []
    return any(port.name == "control" for c in containers for port in (c.ports or []))


def _waiting(status: Any, container: Any) -> tuple[str, str]:
    """Why the pod does not run yet: its container's waiting reason (the kubelet's),
    else the scheduler's reason on ``PodScheduled``."""
    if container is not None and container.state is not None and container.state.waiting:
        return container.state.waiting.reason or "", container.state.waiting.message or ""
    conditions = (status.conditions if status else None) or []
    scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
    if scheduled is not None and scheduled.status == "False":
        return scheduled.reason or "Unschedulable", scheduled.message or ""
    return "", ""


def node_view(node: Any) -> NodeView:
    conditions = (node.status.conditions if node.status else None) or []
    ready = next((c for c in conditions if c.type == "Ready"), None)
    if ready is None:
        return NodeView(node.metadata.name, ready=False, not_ready_since=None)
    is_ready = ready.status == "True"
    return NodeView(
        node.metadata.name,
        ready=is_ready,
        not_ready_since=None if is_ready else ready.last_transition_time,
    )
