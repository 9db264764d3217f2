"""Pure builders of the objects a pipeline owns: its driver pod, the headless Service
executors use to reach the driver, its ServiceAccount, and, only when it runs executor
pods, a RoleBinding to the shipped driver ClusterRole and the executors' own
ServiceAccount. Each returns a plain manifest; ``kube`` applies it.

The driver pod passes the "restricted" Pod Security Standard: non-root, no
privilege escalation, every capability dropped, RuntimeDefault seccomp, read-only
root filesystem with an emptyDir for Spark's scratch space.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from sluice_api import env as env_names
from sluice_api import pod as pod_settings
from sluice_api import secret_refs
from sluice_api.spec import PipelineSpec
from sluice_operator import naming

Manifest = dict[str, Any]

DRIVER_PORT: Final = 7078
BLOCK_MANAGER_PORT: Final = 7079
METRICS_PORT: Final = 8090
RUN_AS_USER: Final = 185  # the uid of the Spark images
STOP_MARGIN_SECONDS: Final = 15
"""Grace beyond ``upgrade.stopTimeoutSeconds``: the driver's own watchdog exits first."""
SCRATCH: Final = pod_settings.SCRATCH_MOUNT
API_SERVER: Final = "https://kubernetes.default.svc:443"


@dataclass(frozen=True)
class Owner:
    """The pipeline object, for owner references and names."""

    name: str
    namespace: str
    uid: str

    def reference(self) -> dict[str, Any]:
        return {
            "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
            "kind": naming.KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def metadata(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "namespace": self.namespace,
            "labels": naming.labels(self.name),
            "ownerReferences": [self.reference()],
        }


def driver_pod(owner: Owner, spec: PipelineSpec, epoch: int, spec_hash: str) -> Manifest:
    name = naming.driver_pod(owner.name, epoch)
    pod = spec.spark.pod
    metadata = owner.metadata(name)
    metadata["labels"] = {**pod.labels, **metadata["labels"], naming.LABEL_EPOCH: str(epoch)}
    metadata["annotations"] = {
        **pod.annotations,
        naming.ANNOTATION_EPOCH: str(epoch),
        naming.ANNOTATION_SPEC_HASH: spec_hash,
    }
    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": pod.service_account_name or naming.service_account(owner.name),
            # Only a driver that starts executor pods talks to the API server; without
            # executors the user's code in it gets no token at all.
            "automountServiceAccountToken": spec.spark.executors.instances > 0,
            "terminationGracePeriodSeconds": spec.upgrade.stop_timeout_seconds
            + STOP_MARGIN_SECONDS,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": RUN_AS_USER,
                "runAsGroup": RUN_AS_USER,
                "fsGroup": RUN_AS_USER,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [_driver_container(owner, spec, epoch)],
            "volumes": [
                {
                    "name": pod_settings.SCRATCH_VOLUME,
                    "emptyDir": {"sizeLimit": spec.spark.driver.scratch},
                },
                *(_dump(volume) for volume in pod.volumes),
            ],
            "nodeSelector": dict(spec.spark.driver.node_selector),
            "tolerations": [_dump(t) for t in spec.spark.driver.tolerations],
        },
    }
    if pod.image_pull_secrets:
        manifest["spec"]["imagePullSecrets"] = [{"name": n} for n in pod.image_pull_secrets]
    if pod.priority_class_name:
        manifest["spec"]["priorityClassName"] = pod.priority_class_name
    if spec.spark.driver.affinity is not None:
        manifest["spec"]["affinity"] = spec.spark.driver.affinity.model_dump(
            by_alias=True, exclude_none=True, exclude_defaults=True
        )
    return manifest


def _dump(model: BaseModel) -> dict[str, Any]:
    """A spec model as the Kubernetes API spells it (the same camelCase names)."""
    return model.model_dump(by_alias=True, exclude_none=True)


def _driver_container(owner: Owner, spec: PipelineSpec, epoch: int) -> Manifest:
    driver = spec.spark.driver
    memory = memory_mib(driver.memory)
    overhead = (
        memory_mib(driver.memory_overhead) if driver.memory_overhead else max(384, memory // 10)
    )
    limits = {"cpu": driver.cpu_limit} if driver.cpu_limit else {}
    return {
        "name": "driver",
        "image": spec.image,
        "imagePullPolicy": spec.spark.pod.image_pull_policy,
        "command": ["python", "-m", "sluice_job"],
        "env": driver_env(owner, spec, epoch) + [_dump(e) for e in spec.spark.pod.env],
        "envFrom": [_dump(e) for e in spec.spark.pod.env_from],
        "ports": [
            {"name": "driver", "containerPort": DRIVER_PORT},
            {"name": "blockmanager", "containerPort": BLOCK_MANAGER_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "resources": {
            "requests": {
                "cpu": str(spec.spark.driver.cores),
                "memory": f"{memory + overhead}Mi",
                "ephemeral-storage": spec.spark.driver.scratch,
            },
            "limits": {
                **limits,
                "memory": f"{memory + overhead}Mi",
                "ephemeral-storage": spec.spark.driver.scratch,
            },
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePath": env_names.DEFAULT_TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": pod_settings.SCRATCH_VOLUME, "mountPath": SCRATCH},
            *(_dump(mount) for mount in spec.spark.pod.volume_mounts),
        ],
    }


def driver_env(owner: Owner, spec: PipelineSpec, epoch: int) -> list[dict[str, Any]]:
    config = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    env: list[dict[str, Any]] = [
        {"name": env_names.CONFIG, "value": json.dumps(config, sort_keys=True)},
        {"name": env_names.PIPELINE, "value": owner.name},
        {"name": env_names.NAMESPACE, "value": owner.namespace},
        {"name": env_names.EPOCH, "value": str(epoch)},
        {"name": env_names.CODE_VERSION, "value": spec.image},
        {"name": env_names.METRICS_PORT, "value": str(METRICS_PORT)},
        _field("POD_NAME", "metadata.name"),
        _field("POD_NAMESPACE", "metadata.namespace"),
        _field(env_names.POD_IP, "status.podIP"),
        {"name": "SPARK_LOCAL_DIRS", "value": f"{SCRATCH}/spark"},
        {"name": "HOME", "value": SCRATCH},
    ]
    if spec.spark.executors.instances > 0:
        env.append({"name": env_names.SPARK_MASTER, "value": f"k8s://{API_SERVER}"})
        env.append(
            {"name": env_names.SPARK_CONF, "value": json.dumps(spark_kubernetes_conf(owner, spec))}
        )
    return env + credential_env(spec)


def _field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def credential_env(spec: PipelineSpec) -> list[dict[str, Any]]:
    """Credentials, TLS material and secret transform options as secretKeyRef env vars:
    never in the spec, never in a log."""
    return [_secret(use.variable, use.secret, use.key) for use in secret_refs.uses(spec)]


def _secret(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def spark_kubernetes_conf(owner: Owner, spec: PipelineSpec) -> dict[str, str]:
    """Spark-on-Kubernetes settings: executors are owned by the driver pod (Spark sets
    the owner reference from ``spark.kubernetes.driver.pod.name``), so they die with
    it; they reach the driver through the headless Service."""
    service = naming.driver_service(owner.name)
    return {
        "spark.kubernetes.namespace": owner.namespace,
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
        "spark.kubernetes.authenticate.driver.serviceAccountName": naming.service_account(
            owner.name
        ),
        "spark.kubernetes.authenticate.executor.serviceAccountName": (
            naming.executor_service_account(owner.name)
        ),
        "spark.kubernetes.executor.podNamePrefix": owner.name[:40],
        "spark.kubernetes.executor.label." + naming.LABEL_PIPELINE: owner.name,
        "spark.kubernetes.executor.label." + naming.LABEL_ROLE: naming.ROLE_EXECUTOR,
        "spark.driver.host": f"{service}.{owner.namespace}.svc",
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
    }


def driver_service(owner: Owner) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owner.metadata(naming.driver_service(owner.name)),
        "spec": {
            "clusterIP": "None",
            "selector": naming.selector(owner.name),
            "publishNotReadyAddresses": True,
            "ports": [
                {"name": "driver", "port": DRIVER_PORT},
                {"name": "blockmanager", "port": BLOCK_MANAGER_PORT},
                {"name": "metrics", "port": METRICS_PORT},
            ],
        },
    }


def service_account(owner: Owner) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": owner.metadata(naming.service_account(owner.name)),
        "automountServiceAccountToken": True,
    }


def executor_service_account(owner: Owner) -> Manifest:
    """Executors' identity: no token, no rights (they never call the API server)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": owner.metadata(naming.executor_service_account(owner.name)),
        "automountServiceAccountToken": False,
    }


DRIVER_CLUSTER_ROLE: Final = "sluice-driver"
"""The ClusterRole the chart ships with what Spark's Kubernetes backend needs to run
executor pods; the operator binds it per pipeline (``--driver-cluster-role``)."""


def role_binding(owner: Owner, cluster_role: str) -> Manifest:
    """The driver's rights in its namespace: the shipped ClusterRole, bound here. The
    operator needs only ``bind`` on that ClusterRole to create this, not the rights
    themselves (RBAC's escalation check), so it holds no verb it hands out."""
    name = naming.service_account(owner.name)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": owner.metadata(name),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_role,
        },
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": owner.namespace}],
    }


def supporting(
    owner: Owner, spec: PipelineSpec, cluster_role: str = DRIVER_CLUSTER_ROLE
) -> list[Manifest]:
    """What must exist before a driver pod, in creation order. Only a driver that runs
    executor pods gets API rights (and executors their own ServiceAccount)."""
    if spec.spark.executors.instances == 0:
        return [service_account(owner), driver_service(owner)]
    return [
        service_account(owner),
        executor_service_account(owner),
        role_binding(owner, cluster_role),
        driver_service(owner),
    ]


UNITS: Final[Mapping[str, int]] = {"": 1, "k": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def memory_mib(text: str) -> int:
    """Spark's memory notation (``2g``, ``512m``) in MiB."""
    match = re.fullmatch(r"(\d+)([kmgt]?)", text.lower())
    if not match:
        raise ValueError(f"not a Spark memory amount: {text!r}")
    number, unit = int(match.group(1)), match.group(2)
    if unit == "k":
        return max(1, number // 1024)
    if unit == "":
        return max(1, number // (1024 * 1024))
    return number * UNITS[unit]
