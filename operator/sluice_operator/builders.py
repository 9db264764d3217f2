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
from sluice_api.resources import Placement
from sluice_api.spark import UI_PORT
from sluice_api.spec import PipelineSpec
from sluice_api.status import StandbyPurpose
from sluice_operator import naming

Manifest = dict[str, Any]

DRIVER_PORT: Final = 7078
BLOCK_MANAGER_PORT: Final = 7079
METRICS_PORT: Final = 8090
CONTROL_PORT: Final = 8091
"""A standby's control port: where the operator promotes it (``sluice_api.promotion``)."""
RUN_AS_USER: Final = 185  # the uid of the Spark images
STOP_MARGIN_SECONDS: Final = 15
"""Grace beyond ``upgrade.stopTimeoutSeconds``: the driver's own watchdog exits first."""
SCRATCH: Final = pod_settings.SCRATCH_MOUNT
MASTER: Final = "k8s://https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"
"""Spark's master in the driver pod: the API server, from the variables every kubelet
sets for the ``kubernetes`` Service (and expands in env values)."""
EXECUTOR_CONTAINER: Final = "executor"
EXECUTOR_WORKDIR: Final = SCRATCH
"""Where executors fetch the driver's jars and files: the scratch emptyDir's own mount,
writable by the pod's group. Not a directory below it: that does not exist when the
container starts, and the runtime (runc) makes it as root, mode 0755."""
SPARK_LOCAL_DIR: Final = f"{SCRATCH}/spark"
"""Spark's local dirs on the driver and, as Spark mounts the driver's on its executors,
on every executor (an emptyDir named ``spark-local-dir-1`` in the template)."""
POD_SECURITY: Final[Mapping[str, Any]] = {
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_USER,
    "runAsGroup": RUN_AS_USER,
    "fsGroup": RUN_AS_USER,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The pod-level half of the restricted Pod Security Standard (driver and executors)."""


def container_security() -> dict[str, Any]:
    """The container-level half: no escalation, no capabilities, read-only root."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


@dataclass(frozen=True)
class Owner:
    """The pipeline object, for owner references and names."""

    name: str
    namespace: str
    uid: str
    cluster: str
    """The cluster the operator runs in (``sluice_api.cluster``): the driver keys its
    checkpoint by it."""
    ui_on_network: bool = False
    """The platform lets Spark's UI listen on the pod's address (``--spark-ui-on-network``);
    otherwise a driver's UI listens on loopback only."""

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


def driver_pod(
    owner: Owner,
    spec: PipelineSpec,
    epoch: int,
    spec_hash: str,
    *,
    standby: StandbyPurpose | None = None,
) -> Manifest:
    """The driver pod of ``epoch``; a ``standby`` one gets ready and waits
    (``SLUICE_STANDBY``): for its predecessor's release (an upgrade's), or to be promoted
    on its control port (a hot standby's). Standbys, and the drivers of a pipeline with
    hot standbys, prefer a node without another driver pod of the pipeline, so that one
    node's loss does not take both."""
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
            "securityContext": dict(POD_SECURITY),
            "containers": [_driver_container(owner, spec, epoch, standby)],
            "volumes": [
                {
                    "name": pod_settings.SCRATCH_VOLUME,
                    "emptyDir": {"sizeLimit": spec.spark.driver.scratch},
                },
                *(_dump(volume) for volume in pod.volumes),
            ],
        },
    }
    _settle(manifest["spec"], spec, spec.spark.driver)
    if standby is not None or spec.standby > 0:
        _apart_from_other_drivers(manifest["spec"], owner.name)
    return manifest


def _apart_from_other_drivers(pod_spec: Manifest, pipeline: str) -> None:
    """Prefer (not require: one node left must still run both) a node without another
    driver pod of ``pipeline``, beside any anti-affinity the spec asks for."""
    affinity = pod_spec.setdefault("affinity", {})
    anti = affinity.setdefault("podAntiAffinity", {})
    anti.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
        {
            "weight": 100,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": naming.selector(pipeline)},
                "topologyKey": "kubernetes.io/hostname",
            },
        }
    )


def _settle(pod_spec: Manifest, spec: PipelineSpec, placement: Placement) -> None:
    """What driver and executor pods share: where they may run (each role its own
    placement), pull secrets and priority (the pipeline's)."""
    pod = spec.spark.pod
    pod_spec["nodeSelector"] = dict(placement.node_selector)
    pod_spec["tolerations"] = [_dump(t) for t in placement.tolerations]
    if placement.affinity is not None:
        pod_spec["affinity"] = placement.affinity.model_dump(
            by_alias=True, exclude_none=True, exclude_defaults=True
        )
    if pod.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in pod.image_pull_secrets]
    if pod.priority_class_name:
        pod_spec["priorityClassName"] = pod.priority_class_name


def _dump(model: BaseModel) -> dict[str, Any]:
    """A spec model as the Kubernetes API spells it (the same camelCase names)."""
    return model.model_dump(by_alias=True, exclude_none=True)


def _standby_env(standby: StandbyPurpose | None) -> list[Manifest]:
    if standby is None:
        return []
    mode = env_names.STANDBY_HOT if standby is StandbyPurpose.FAILOVER else "1"
    return [
        {"name": env_names.STANDBY, "value": mode},
        {"name": env_names.CONTROL_PORT, "value": str(CONTROL_PORT)},
    ]


def _driver_container(
    owner: Owner, spec: PipelineSpec, epoch: int, standby: StandbyPurpose | None
) -> Manifest:
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
        "env": driver_env(owner, spec, epoch)
        + _standby_env(standby)
        + [_dump(e) for e in spec.spark.pod.env],
        "envFrom": [_dump(e) for e in spec.spark.pod.env_from],
        "ports": [
            {"name": name, "containerPort": port}
            for name, port in (
                driver_ports(spec) | ({"control": CONTROL_PORT} if standby is not None else {})
            ).items()
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
        "securityContext": container_security(),
        "terminationMessagePath": env_names.DEFAULT_TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": pod_settings.SCRATCH_VOLUME, "mountPath": SCRATCH},
            *(_dump(mount) for mount in spec.spark.pod.volume_mounts),
        ],
    }


def driver_env(owner: Owner, spec: PipelineSpec, epoch: int) -> list[dict[str, Any]]:
    # What the spec sets apart from the defaults, which the driver's own model fills
    # in: a pipeline image built on an older sluice-job, whose model refuses fields it
    # does not know, still starts after the operator gained a defaulted field.
    config = spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    env: list[dict[str, Any]] = [
        {"name": env_names.CONFIG, "value": json.dumps(config, sort_keys=True)},
        {"name": env_names.PIPELINE, "value": owner.name},
        {"name": env_names.NAMESPACE, "value": owner.namespace},
        {"name": env_names.CLUSTER_ID, "value": owner.cluster},
        {"name": env_names.EPOCH, "value": str(epoch)},
        {"name": env_names.CODE_VERSION, "value": spec.image},
        {"name": env_names.METRICS_PORT, "value": str(METRICS_PORT)},
        _field("POD_NAME", "metadata.name"),
        _field("POD_NAMESPACE", "metadata.namespace"),
        _field(env_names.POD_IP, "status.podIP"),
        {"name": "SPARK_LOCAL_DIRS", "value": SPARK_LOCAL_DIR},
        {"name": "HOME", "value": SCRATCH},
    ]
    if spec.spark.executors.instances > 0:
        template = executor_pod_template(owner, spec, epoch)
        env += [
            {"name": env_names.SPARK_MASTER, "value": MASTER},
            {
                "name": env_names.SPARK_CONF,
                "value": json.dumps(spark_kubernetes_conf(owner, spec, epoch), sort_keys=True),
            },
            {
                "name": env_names.EXECUTOR_POD_TEMPLATE,
                "value": json.dumps(template, sort_keys=True),
            },
            spark_auth_env(owner),
        ]
    if owner.ui_on_network:
        env.append({"name": env_names.UI_ON_NETWORK, "value": "true"})
    return env + credential_env(spec) + [spark_env_list(env)]


def spark_env_list(env: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``SLUICE_SPARK_*`` names set here, for the driver, which ignores any other
    (``sluice_api.env.OPERATOR_SPARK_ENV``): an ``envFrom`` source cannot add one."""
    spark = [e["name"] for e in env if e["name"].startswith(env_names.SPARK_PREFIX)]
    return {"name": env_names.OPERATOR_SPARK_ENV, "value": ",".join(spark)}


def spark_auth_env(owner: Owner) -> dict[str, Any]:
    """Spark's RPC secret for the driver and its executors, as a reference only."""
    name = naming.spark_auth_secret(owner.name)
    return _secret(env_names.SPARK_AUTH_SECRET, name, env_names.SPARK_AUTH_SECRET_KEY)


def _field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def credential_env(spec: PipelineSpec) -> list[dict[str, Any]]:
    """Credentials, TLS material and secret transform options as secretKeyRef env vars:
    never in the spec, never in a log."""
    return [_secret(use.variable, use.secret, use.key) for use in secret_refs.uses(spec)]


def _secret(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def spark_kubernetes_conf(owner: Owner, spec: PipelineSpec, epoch: int) -> dict[str, str]:
    """Spark-on-Kubernetes settings of a driver in client mode inside its pod.

    Executors reach the driver at the pod's own address (``$(POD_IP)``, expanded by the
    kubelet) on fixed ports; they are owned by the driver pod (Spark sets the owner
    reference from ``spark.kubernetes.driver.pod.name``), so they go with it, a fenced
    driver's included. Spark makes no ConfigMap and no volume claim for them, so the
    driver's account needs rights on pods only (the chart's ClusterRole)."""
    return {
        "spark.kubernetes.namespace": owner.namespace,
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.container.image.pullPolicy": spec.spark.pod.image_pull_policy,
        "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
        "spark.kubernetes.authenticate.executor.serviceAccountName": (
            naming.executor_service_account(owner.name)
        ),
        "spark.kubernetes.executor.podNamePrefix": naming.executor_pod_prefix(owner.name, epoch),
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        "spark.kubernetes.executor.disableConfigMap": "true",
        "spark.kubernetes.driver.service.deleteOnTermination": "false",
        "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
        "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
        "spark.driver.host": "$(POD_IP)",
        "spark.driver.bindAddress": "$(POD_IP)",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
        # Only this pipeline's executors may talk to it, and not in clear. The secret
        # comes from the pipeline's Secret (``spark_auth_secret``) through a
        # secretKeyRef, which the driver and the executor role write to the file
        # Spark reads (``sluice_job.spark_auth``): Spark then puts no secret in the
        # executor pods' environment, where anyone who may read pods would see it.
        "spark.authenticate": "true",
        "spark.network.crypto.enabled": "true",
    }


def executor_pod_template(owner: Owner, spec: PipelineSpec, epoch: int) -> Manifest:
    """The executor pods' template (``spark.kubernetes.executor.podTemplateFile``):
    the restricted security context, no API token, Spark's scratch in emptyDirs (the
    root filesystem is read-only), and the pipeline's pod settings (environment,
    volumes, pull secrets, priority, labels) as on the driver. Spark adds the image,
    the command, its variables, resources and the owner reference."""
    executors = spec.spark.executors
    pod = spec.spark.pod
    scratch = {"sizeLimit": executors.scratch}
    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {**pod.labels, **naming.executor_labels(owner.name, epoch)},
            "annotations": {**pod.annotations, naming.ANNOTATION_EPOCH: str(epoch)},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": dict(POD_SECURITY),
            "containers": [
                {
                    "name": EXECUTOR_CONTAINER,
                    # Executors fetch the driver's jars and files into their working
                    # directory: it must be writable (the root filesystem is not).
                    "workingDir": EXECUTOR_WORKDIR,
                    "securityContext": container_security(),
                    "env": [
                        {"name": "HOME", "value": SCRATCH},
                        spark_auth_env(owner),
                        *(_dump(e) for e in pod.env),
                    ],
                    "envFrom": [_dump(e) for e in pod.env_from],
                    "resources": {
                        "requests": {"ephemeral-storage": executors.scratch},
                        "limits": {"ephemeral-storage": executors.scratch},
                    },
                    "volumeMounts": [
                        {"name": pod_settings.SCRATCH_VOLUME, "mountPath": SCRATCH},
                        {"name": SPARK_LOCAL_DIR_VOLUME, "mountPath": SPARK_LOCAL_DIR},
                        *(_dump(mount) for mount in pod.volume_mounts),
                    ],
                }
            ],
            "volumes": [
                {"name": pod_settings.SCRATCH_VOLUME, "emptyDir": dict(scratch)},
                {"name": SPARK_LOCAL_DIR_VOLUME, "emptyDir": dict(scratch)},
                *(_dump(volume) for volume in pod.volumes),
            ],
        },
    }
    _settle(manifest["spec"], spec, executors)
    manifest["spec"]["tolerations"] += [
        {
            "key": taint,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": spec.failover.node_lost_seconds,
        }
        for taint in NODE_LOST_TAINTS
    ]
    return manifest


def executor_secrets(owner: Owner, spec: PipelineSpec) -> tuple[str, ...]:
    """The Secrets the pipeline's executor pods may name: exactly those of their template
    (the Spark RPC secret, and spark.pod's env, envFrom, volumes and pull secrets, which
    the operator consent-checked), sorted; none without executors. The operator writes
    them to ``status.executorSecrets`` before the driver exists, and the chart's
    admission policy refuses an executor pod a driver creates naming any other."""
    if spec.spark.executors.instances == 0:
        return ()
    return pod_secrets(executor_pod_template(owner, spec, 0))


def pod_secrets(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """Every Secret a pod manifest names, sorted, in the fields the admission policy
    checks: ``secret`` and ``projected`` volumes, containers' (and init containers')
    ``secretKeyRef`` env and ``secretRef`` envFrom, and ``imagePullSecrets``."""
    spec = pod.get("spec") or {}
    names: set[str] = set()
    for volume in spec.get("volumes") or ():
        if "secret" in volume:
            names.add(volume["secret"].get("secretName", ""))
        for source in (volume.get("projected") or {}).get("sources") or ():
            if "secret" in source:
                names.add(source["secret"].get("name", ""))
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        for env in container.get("env") or ():
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref is not None:
                names.add(ref.get("name", ""))
        for source in container.get("envFrom") or ():
            if "secretRef" in source:
                names.add(source["secretRef"].get("name", ""))
    names.update(ref.get("name", "") for ref in spec.get("imagePullSecrets") or ())
    return tuple(sorted(names))


NODE_LOST_TAINTS: Final = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
"""The taints of a lost node: an executor there is evicted after
``failover.nodeLostSeconds`` (not Kubernetes' default 300 s), so Spark replaces it as
soon as the operator would replace a driver there."""


SPARK_LOCAL_DIR_VOLUME: Final = f"{pod_settings.SPARK_LOCAL_DIR_VOLUME_PREFIX}1"
"""The name Spark looks for in a template before it adds its own local-dir volume."""


def driver_ports(spec: PipelineSpec) -> dict[str, int]:
    """The driver's named ports: Spark's RPC and block manager (executors), metrics,
    and the UI when ``spark.ui.enabled``."""
    ports = {"driver": DRIVER_PORT, "blockmanager": BLOCK_MANAGER_PORT, "metrics": METRICS_PORT}
    if spec.spark.ui.enabled:
        ports["ui"] = UI_PORT
    return ports


def driver_service(owner: Owner, spec: PipelineSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owner.metadata(naming.driver_service(owner.name)),
        "spec": {
            "clusterIP": "None",
            "selector": naming.selector(owner.name),
            "publishNotReadyAddresses": True,
            "ports": [{"name": name, "port": port} for name, port in driver_ports(spec).items()],
        },
    }


def service_account(owner: Owner) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": owner.metadata(naming.service_account(owner.name)),
        "automountServiceAccountToken": True,
    }


def spark_auth_secret(owner: Owner) -> Manifest:
    """The Secret of Spark's RPC secret (driver and executors authenticate each other
    with it). Its value is made when the operator creates it
    (``sluice_operator.kube``), not here: a manifest is a pure function of the spec.
    Only the operator and whoever may read Secrets in the namespace can read it; the
    driver's account cannot."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": owner.metadata(naming.spark_auth_secret(owner.name)),
        "type": "Opaque",
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
        return [service_account(owner), driver_service(owner, spec)]
    return [
        spark_auth_secret(owner),
        service_account(owner),
        executor_service_account(owner),
        role_binding(owner, cluster_role),
        driver_service(owner, spec),
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
