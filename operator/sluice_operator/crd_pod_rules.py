"""The CEL rules of ``spec.spark.pod`` and of the pods' affinities.

Every rule of ``sluice_api.pod`` (reserved environment variables, volume sources,
mount paths, priority classes, label and annotation keys) is also a rule of the CRD,
so the API server rejects a bad manifest naming the field; they are built here from
the same constants. Pure data; ``crd`` puts them in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sluice_api import pod
from sluice_operator.crd_rules import Rule, cel_list

_RESERVED_ENV_PREFIXES: Final = cel_list(pod.RESERVED_ENV_PREFIXES)
_RESERVED_ENV_NAMES: Final = cel_list(pod.RESERVED_ENV)
_RESERVED_ENV: Final = (
    f"{_RESERVED_ENV_PREFIXES}.exists(p, self.name.startsWith(p))"
    f" || self.name in {_RESERVED_ENV_NAMES}"
)
_RESERVED_ENV_PREFIX: Final = (
    f"{_RESERVED_ENV_PREFIXES}.exists(p, self.prefix.startsWith(p) || p.startsWith(self.prefix))"
    f" || {_RESERVED_ENV_NAMES}.exists(n, n.startsWith(self.prefix) && n != self.prefix)"
)
"""``pod.reserved_env_prefix`` in CEL."""
_RESERVED_KEY: Final = (
    f"k.startsWith('{pod.RESERVED_LABEL_PREFIX}') || k in ["
    + ", ".join(f"'{k}'" for k in pod.RESERVED_LABELS)
    + "]"
)
_KUBELET_FILES: Final = cel_list(pod.KUBELET_FILES)
_UP_A_LEVEL: Final = r"!self.matches('(^|/)\\.\\.(/|$)')"

_IN_VALUES: Final = "self.operator in ['In', 'NotIn']"
_NO_VALUES: Final = "(!has(self.values) || size(self.values) == 0)"
_SOME_VALUES: Final = "(has(self.values) && size(self.values) > 0)"
_LABEL_REQUIREMENT: Final = Rule(
    f"({_IN_VALUES}) ? {_SOME_VALUES} : {_NO_VALUES}",
    "In and NotIn take values; Exists and DoesNotExist take none",
)
_NODE_REQUIREMENT: Final = Rule(
    f"({_IN_VALUES}) ? {_SOME_VALUES} : (self.operator in ['Exists', 'DoesNotExist'])"
    f" ? {_NO_VALUES} : (has(self.values) && size(self.values) == 1"
    " && self.values[0].matches('^[0-9]+$'))",
    "In and NotIn take values; Exists and DoesNotExist take none; Gt and Lt take one integer",
)


def _affinity_rules(role: str) -> dict[str, tuple[Rule, ...]]:
    """The operator/values rules of ``spec.spark.<role>.affinity``."""
    node = f"spec.spark.{role}.affinity.nodeAffinity"
    anti = f"spec.spark.{role}.affinity.podAntiAffinity"
    return {
        f"{node}.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[].matchExpressions[]": (_NODE_REQUIREMENT,),
        f"{node}.preferredDuringSchedulingIgnoredDuringExecution[].preference.matchExpressions[]": (
            _NODE_REQUIREMENT,
        ),
        f"{anti}.requiredDuringSchedulingIgnoredDuringExecution[]"
        ".labelSelector.matchExpressions[]": (_LABEL_REQUIREMENT,),
        f"{anti}.preferredDuringSchedulingIgnoredDuringExecution[]"
        ".podAffinityTerm.labelSelector.matchExpressions[]": (_LABEL_REQUIREMENT,),
    }


POD_RULES: Final[Mapping[str, tuple[Rule, ...]]] = {
    **_affinity_rules("driver"),
    **_affinity_rules("executors"),
    "spec.spark.pod": (
        Rule(
            "!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes)"
            " && self.volumes.exists(v, v.name == m.name))",
            "spark.pod.volumeMounts names a volume that spark.pod.volumes does not have",
            field_path=".volumeMounts",
        ),
    ),
    "spec.spark.pod.env[]": (
        Rule(
            f"!({_RESERVED_ENV})",
            f"spark.pod.env may not set a reserved name; reserved are {pod.RESERVED_ENV_TEXT}",
            field_path=".name",
            message_expression=(
                f"'spark.pod.env may not set ' + self.name + '; reserved are "
                f"{pod.RESERVED_ENV_TEXT}'"
            ),
        ),
        Rule(
            "!(has(self.value) && has(self.valueFrom))",
            "set value or valueFrom, not both",
        ),
    ),
    "spec.spark.pod.env[].valueFrom": (
        Rule(
            "has(self.secretKeyRef) != has(self.configMapKeyRef)",
            "valueFrom takes exactly one of secretKeyRef or configMapKeyRef",
        ),
    ),
    "spec.spark.pod.envFrom[]": (
        Rule(
            "has(self.configMapRef) != has(self.secretRef)",
            "envFrom takes exactly one of configMapRef or secretRef",
        ),
        Rule(
            f"!has(self.prefix) || !({_RESERVED_ENV_PREFIX})",
            "spark.pod.envFrom prefix can make a reserved name of a key; "
            f"reserved are {pod.RESERVED_ENV_TEXT}",
            field_path=".prefix",
            message_expression=(
                "'spark.pod.envFrom prefix ' + self.prefix + ' can make a reserved name of a "
                f"key; reserved are {pod.RESERVED_ENV_TEXT}'"
            ),
        ),
    ),
    "spec.spark.pod.volumes[]": (
        Rule(
            "[has(self.configMap), has(self.secret), has(self.emptyDir),"
            " has(self.persistentVolumeClaim)].filter(x, x).size() == 1",
            "a volume takes exactly one of configMap, secret, emptyDir or "
            "persistentVolumeClaim (no hostPath or other node or cluster sources)",
        ),
        Rule(
            f"self.name != '{pod.SCRATCH_VOLUME}'"
            f" && !self.name.startsWith('{pod.SPARK_LOCAL_DIR_VOLUME_PREFIX}')",
            f"volume names '{pod.SCRATCH_VOLUME}' and '{pod.SPARK_LOCAL_DIR_VOLUME_PREFIX}*' "
            "are the pods' own scratch space",
        ),
    ),
    "spec.spark.pod.volumes[].configMap.items[].path": (
        Rule(_UP_A_LEVEL, "path must not contain '..'"),
    ),
    "spec.spark.pod.volumes[].secret.items[].path": (
        Rule(_UP_A_LEVEL, "path must not contain '..'"),
    ),
    "spec.spark.pod.volumeMounts[]": (
        Rule(
            f"!(self.mountPath == '{pod.SCRATCH_MOUNT}' || self.mountPath == "
            f"'{pod.SCRATCH_MOUNT}/' || self.mountPath.startsWith('{pod.SCRATCH_MOUNT}/'))",
            f"{pod.SCRATCH_MOUNT} is the driver's scratch space: mount elsewhere",
            field_path=".mountPath",
        ),
        Rule(
            r"!self.mountPath.matches('//|/\\.\\.?(/|$)')",
            "mountPath has an empty, '.' or '..' segment (//tmp and /./tmp are /tmp)",
            field_path=".mountPath",
            message_expression=(
                "'mountPath ' + self.mountPath + ' has an empty, dot or dot-dot segment'"
            ),
        ),
        Rule(
            f"!({_KUBELET_FILES}.exists(f, self.mountPath == f || self.mountPath == f + '/'))",
            f"mountPath is a file the kubelet writes: {', '.join(pod.KUBELET_FILES)}",
            field_path=".mountPath",
            message_expression="'mountPath ' + self.mountPath + ' is a file the kubelet writes'",
        ),
    ),
    "spec.spark.pod.priorityClassName": (
        Rule(
            f"!self.startsWith('{pod.SYSTEM_PRIORITY_PREFIX}')",
            f"spark.pod.priorityClassName may not be a {pod.SYSTEM_PRIORITY_PREFIX}* class "
            "(the cluster's own)",
            message_expression=(
                f"'spark.pod.priorityClassName ' + self + ': {pod.SYSTEM_PRIORITY_PREFIX}* "
                "classes belong to the cluster'"
            ),
        ),
    ),
    "spec.spark.pod.labels": (
        Rule(
            f"self.all(k, k.matches(r'{pod.LABEL_KEY}') && !({_RESERVED_KEY}))",
            "spark.pod.labels: keys are label keys, not sluice.dev/* or "
            "app.kubernetes.io/{name,instance,managed-by} (the operator's)",
        ),
    ),
    "spec.spark.pod.annotations": (
        Rule(
            f"self.all(k, k.matches(r'{pod.LABEL_KEY}') && !k.startsWith("
            f"'{pod.RESERVED_LABEL_PREFIX}'))",
            "spark.pod.annotations: keys are annotation keys, not sluice.dev/* (the operator's)",
        ),
    ),
}
