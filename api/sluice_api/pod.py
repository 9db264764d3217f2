"""What a pipeline may add to its pods: ``spec.spark.pod``.

Real clusters need more on a driver pod than an image: environment from ConfigMaps and
Secrets, mounted files (a CA bundle, a keytab, a config file), a pull secret for a
private registry, labels and annotations their tooling selects by, a priority class.
These are explicit fields, not a pod template (the Spark and Flink operators take a
template): every field here is one a tenant who may create a pipeline may also set
on a pod of their own, and nothing here can reach the node (no hostPath, no host
network, no privileged or root container) or weaken the restricted security context
the operator sets. A name the driver relies on (``SLUICE_*``, ``SPARK_*`` and the
other reserved environment variables, the ``sluice.dev/`` labels, the scratch mount
at ``/tmp``) cannot be overridden.

Every rule here is also a CEL rule of the CRD (``sluice_operator.crd_pod_rules``), so
the API server rejects a bad manifest naming the field; the model's validators say the
same for the driver and for tests without an API server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Final, Self

from pydantic import Field, field_validator, model_validator

from sluice_api.names import GROUP
from sluice_api.spec_base import K8S_NAME, Model

ENV_NAME: Final = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
KEY: Final = r"^[-._a-zA-Z0-9]+$"
DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
QUANTITY: Final = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$"
LABEL_KEY: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE: Final = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"

RESERVED_ENV_PREFIXES: Final = ("SLUICE_", "SPARK_", "PYSPARK_", "HADOOP_", "PYTHON", "LD_")
"""The driver's configuration, Spark's and Hadoop's own variables (``SPARK_CONF_DIR``,
``SPARK_EXTRA_CLASSPATH``, ``HADOOP_CONF_DIR``), and the variables through which the
Python interpreter (``PYTHONPATH``, ``PYTHONSTARTUP``) or the dynamic loader
(``LD_PRELOAD``, ``LD_LIBRARY_PATH``) would load code the image does not hold."""
RESERVED_ENV: Final = (
    "POD_NAME",
    "POD_NAMESPACE",
    "POD_IP",
    "HOME",
    "PATH",
    "JAVA_HOME",
    "CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
)
"""Set by the operator (the pod's identity) or the image (``HOME``, ``PATH``,
``JAVA_HOME``), or read by every JVM as options or classes to load (``-javaagent:``).
Where a platform allows only its own images (``docs/security.md``), an environment
variable must not bring code in another way."""
RESERVED_ENV_TEXT: Final = (
    ", ".join([*(f"{p}*" for p in RESERVED_ENV_PREFIXES), *RESERVED_ENV])
    + ": the operator or the image sets them, or they load code the image does not hold"
)
SCRATCH_MOUNT: Final = "/tmp"
"""The driver's writable scratch space (the root filesystem is read-only)."""
KUBELET_FILES: Final = ("/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/dev/termination-log")
"""Files the kubelet writes into every container. A volume mounted over ``/etc/hosts``
would redirect the very names a Secret's ``sluice.dev/allowed-endpoints`` lets its
value go to; one over the termination log would forge what the driver reports."""
SYSTEM_PRIORITY_PREFIX: Final = "system-"
"""Kubernetes reserves PriorityClass names with this prefix (``system-node-critical``,
``system-cluster-critical``) for the cluster's own pods: a driver with one preempts
every other tenant's pods on its node."""
UNNORMALISED_PATH: Final = r"//|/\.\.?(/|$)"
"""An empty, ``.`` or ``..`` segment: ``//tmp`` and ``/./tmp`` are ``/tmp`` to the
runtime, but not to a rule comparing strings."""
SCRATCH_VOLUME: Final = "scratch"
SPARK_LOCAL_DIR_VOLUME_PREFIX: Final = "spark-local-dir-"
"""Spark's local-dir volumes on executor pods (``spark-local-dir-1``, ...)."""
"""The emptyDir mounted at :data:`SCRATCH_MOUNT`."""
RESERVED_LABEL_PREFIX: Final = f"{GROUP}/"
RESERVED_LABELS: Final = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
)

ObjectName = Annotated[str, Field(pattern=K8S_NAME, max_length=253)]


def reserved_env(name: str) -> bool:
    return name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES)


def reserved_env_prefix(prefix: str) -> bool:
    """Whether an ``envFrom`` prefix makes a reserved name of some key: it starts
    with a reserved prefix (``SPARK_``), or a reserved prefix or name starts with it
    and a key completes it (``S`` + ``PARK_CONF_DIR``, ``LD`` + ``_PRELOAD``)."""
    return (
        prefix.startswith(RESERVED_ENV_PREFIXES)
        or any(reserved.startswith(prefix) for reserved in RESERVED_ENV_PREFIXES)
        or any(name.startswith(prefix) and name != prefix for name in RESERVED_ENV)
    )


def reserved_keys(keys: Iterable[str], prefix: str | None = None) -> tuple[str, ...]:
    """The keys of an ``envFrom`` ConfigMap or Secret that become reserved variables
    with ``prefix`` put before each (a pure function), in the order given. The prefix
    itself is checked by :func:`reserved_env_prefix`; this is what the keys make of it."""
    return tuple(key for key in keys if reserved_env(f"{prefix or ''}{key}"))


def reserved_label(key: str) -> bool:
    return key in RESERVED_LABELS or key.startswith(RESERVED_LABEL_PREFIX)


class KeyRef(Model):
    """One key of a Secret or ConfigMap of the pipeline's namespace."""

    name: ObjectName = Field(description="Name of the Secret or ConfigMap.")
    key: str = Field(pattern=KEY, max_length=253, description="Key in it.")
    optional: bool = Field(
        default=False,
        description=(
            "Start the pod even if it is missing; a ConfigMap only: a pipeline naming a "
            "missing Secret, optional or not, gets no pod until it exists with the consent label."
        ),
    )


class EnvSource(Model):
    secret_key_ref: KeyRef | None = Field(default=None, description="A key of a Secret.")
    config_map_key_ref: KeyRef | None = Field(default=None, description="A key of a ConfigMap.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("valueFrom takes exactly one of secretKeyRef or configMapKeyRef")
        return self


class EnvVar(Model):
    name: str = Field(
        pattern=ENV_NAME,
        max_length=256,
        description=f"Variable name; not {RESERVED_ENV_TEXT.split(':')[0]}.",
    )
    value: str | None = Field(default=None, max_length=32768, description="A literal value.")
    value_from: EnvSource | None = Field(
        default=None, description="The value from a Secret or ConfigMap key."
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if reserved_env(value):
            raise ValueError(f"spark.pod.env may not set {value}: reserved are {RESERVED_ENV_TEXT}")
        return value

    @model_validator(mode="after")
    def _one_value(self) -> Self:
        if self.value is not None and self.value_from is not None:
            raise ValueError(f"env {self.name}: set value or valueFrom, not both")
        return self


class NameRef(Model):
    name: ObjectName = Field(description="Name of the Secret or ConfigMap.")
    optional: bool = Field(
        default=False,
        description=(
            "Start the pod even if it is missing; a ConfigMap only: a pipeline naming a "
            "missing Secret, optional or not, gets no pod until it exists with the consent label."
        ),
    )


class EnvFrom(Model):
    prefix: str | None = Field(
        default=None,
        pattern=ENV_NAME,
        max_length=64,
        description="Prefix of every name; not one that makes a reserved name of a key.",
    )
    config_map_ref: NameRef | None = Field(default=None, description="Every key of a ConfigMap.")
    secret_ref: NameRef | None = Field(default=None, description="Every key of a Secret.")

    @field_validator("prefix")
    @classmethod
    def _no_reserved_names(cls, value: str | None) -> str | None:
        if value is not None and reserved_env_prefix(value):
            raise ValueError(
                f"spark.pod.envFrom prefix {value} can make a reserved name of a key; "
                f"reserved are {RESERVED_ENV_TEXT}"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.config_map_ref is None) == (self.secret_ref is None):
            raise ValueError("envFrom takes exactly one of configMapRef or secretRef")
        return self


class KeyToPath(Model):
    key: str = Field(pattern=KEY, max_length=253, description="Key in the source.")
    path: str = Field(
        pattern=r"^[^/]",
        max_length=253,
        description="Relative file path in the volume.",
    )

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        if ".." in value.split("/"):
            raise ValueError("path must not contain '..'")
        return value


class ConfigMapVolume(Model):
    name: ObjectName = Field(description="ConfigMap of the namespace.")
    items: list[KeyToPath] = Field(
        default_factory=list, max_length=16, description="Keys to mount; default all."
    )
    optional: bool = Field(default=False, description="Start the pod even if it is missing.")


class SecretVolume(Model):
    secret_name: ObjectName = Field(description="Secret of the namespace.")
    items: list[KeyToPath] = Field(
        default_factory=list, max_length=16, description="Keys to mount; default all."
    )
    optional: bool = Field(
        default=False,
        description=(
            "Kept for the Pod API: a pipeline naming a missing Secret gets no pod until it "
            "exists with the consent label, optional or not."
        ),
    )


class EmptyDirVolume(Model):
    medium: str | None = Field(
        default=None, pattern=r"^(Memory)?$", max_length=6, description="'' (node disk) or Memory."
    )
    size_limit: str | None = Field(
        default=None, pattern=QUANTITY, max_length=32, description="Size limit, e.g. 1Gi."
    )


class ClaimVolume(Model):
    claim_name: ObjectName = Field(description="PersistentVolumeClaim of the namespace.")
    read_only: bool = Field(default=False, description="Mount read-only.")


VOLUME_SOURCES: Final = ("configMap", "secret", "emptyDir", "persistentVolumeClaim")


class Volume(Model):
    """A volume of the pipeline's pods: a ConfigMap, a Secret, an emptyDir or a claim;
    no source that reaches the node or another namespace."""

    name: str = Field(
        pattern=DNS_LABEL, max_length=63, description="Volume name, referenced by volumeMounts."
    )
    config_map: ConfigMapVolume | None = Field(default=None, description="Files of a ConfigMap.")
    secret: SecretVolume | None = Field(default=None, description="Files of a Secret.")
    empty_dir: EmptyDirVolume | None = Field(default=None, description="A scratch directory.")
    persistent_volume_claim: ClaimVolume | None = Field(
        default=None, description="A PersistentVolumeClaim."
    )

    @field_validator("name")
    @classmethod
    def _not_scratch(cls, value: str) -> str:
        if value == SCRATCH_VOLUME or value.startswith(SPARK_LOCAL_DIR_VOLUME_PREFIX):
            raise ValueError(
                f"volume names {SCRATCH_VOLUME!r} and '{SPARK_LOCAL_DIR_VOLUME_PREFIX}*' are "
                "the pods' own scratch space"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        sources = [self.config_map, self.secret, self.empty_dir, self.persistent_volume_claim]
        if sum(s is not None for s in sources) != 1:
            raise ValueError(f"volume {self.name}: set exactly one of {', '.join(VOLUME_SOURCES)}")
        return self


class VolumeMount(Model):
    name: str = Field(
        pattern=DNS_LABEL, max_length=63, description="A volume of spark.pod.volumes."
    )
    mount_path: str = Field(
        pattern=r"^/",
        max_length=1024,
        description=(
            "Absolute path without empty, '.' or '..' segments; not /tmp or below it, nor a "
            "file the kubelet writes (/etc/hosts, /etc/hostname, /etc/resolv.conf, "
            "/dev/termination-log)."
        ),
    )
    read_only: bool = Field(default=False, description="Mount read-only.")
    sub_path: str | None = Field(
        default=None, pattern=r"^[^/]", max_length=1024, description="Path inside the volume."
    )

    @field_validator("mount_path")
    @classmethod
    def _not_scratch(cls, value: str) -> str:
        if re.search(UNNORMALISED_PATH, value):
            raise ValueError(f"mountPath {value} has an empty, '.' or '..' segment")
        if value.rstrip("/") == SCRATCH_MOUNT or value.startswith(SCRATCH_MOUNT + "/"):
            raise ValueError(f"{SCRATCH_MOUNT} is the driver's scratch space")
        if value.rstrip("/") in KUBELET_FILES:
            raise ValueError(f"mountPath {value} is a file the kubelet writes")
        return value


class PodSettings(Model):
    """Additions to the pipeline's pods (docs/pod-settings.md)."""

    env: list[EnvVar] = Field(default_factory=list, max_length=128, description="Environment.")
    env_from: list[EnvFrom] = Field(
        default_factory=list, max_length=16, description="Environment from whole objects."
    )
    volumes: list[Volume] = Field(default_factory=list, max_length=16, description="Volumes.")
    volume_mounts: list[VolumeMount] = Field(
        default_factory=list, max_length=16, description="Where the volumes are mounted."
    )
    image_pull_secrets: list[ObjectName] = Field(
        default_factory=list, max_length=8, description="Secrets to pull the image with."
    )
    image_pull_policy: str = Field(
        default="IfNotPresent",
        pattern=r"^(Always|IfNotPresent|Never)$",
        max_length=12,
        description="Always, IfNotPresent or Never.",
    )
    labels: dict[str, Annotated[str, Field(pattern=LABEL_VALUE, max_length=63)]] = Field(
        default_factory=dict,
        max_length=32,
        description="Labels of the pods; not sluice.dev/* or app.kubernetes.io/{name,instance,"
        "managed-by}.",
    )
    annotations: dict[str, Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=dict, max_length=32, description="Annotations; not sluice.dev/*."
    )
    priority_class_name: ObjectName | None = Field(
        default=None,
        description=(
            f"PriorityClass of the pods; not {SYSTEM_PRIORITY_PREFIX}* (the cluster's own, "
            "which preempt other tenants' pods)."
        ),
    )
    service_account_name: ObjectName | None = Field(
        default=None,
        description=(
            "ServiceAccount the driver pod runs as (for a workload identity: GKE, EKS, "
            "AKS); only one the platform lists in the operator's "
            "driverServiceAccounts, and only without executors. Its token is not "
            "mounted. Default: the pipeline's own account."
        ),
    )

    @field_validator("priority_class_name")
    @classmethod
    def _not_the_systems(cls, value: str | None) -> str | None:
        if value is not None and value.startswith(SYSTEM_PRIORITY_PREFIX):
            raise ValueError(
                f"spark.pod.priorityClassName {value}: {SYSTEM_PRIORITY_PREFIX}* classes "
                "belong to the cluster"
            )
        return value

    @field_validator("labels", "annotations")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not re.match(LABEL_KEY, k) or len(k) > 317]
        if bad:
            raise ValueError(f"not a label or annotation key: {', '.join(sorted(bad))}")
        reserved = [k for k in value if reserved_label(k)]
        if reserved:
            raise ValueError(f"set by the operator: {', '.join(sorted(reserved))}")
        return value

    @model_validator(mode="after")
    def _mounts(self) -> Self:
        names = [v.name for v in self.volumes]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"volume name used twice: {', '.join(twice)}")
        unknown = sorted({m.name for m in self.volume_mounts} - set(names))
        if unknown:
            raise ValueError(
                "spark.pod.volumeMounts names a volume that spark.pod.volumes does not have: "
                + ", ".join(unknown)
            )
        paths = [m.mount_path for m in self.volume_mounts]
        again = sorted({p for p in paths if paths.count(p) > 1})
        if again:
            raise ValueError(f"mountPath used twice: {', '.join(again)}")
        return self
