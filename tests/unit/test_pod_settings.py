"""``spec.spark.pod``: what a pipeline adds to its pods, and what it may not touch."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluice_api.spec import PipelineSpec
from sluice_operator import builders

pytestmark = pytest.mark.unit

OWNER = builders.Owner("orders", "team-a", "uid-1", "cluster-1")


def spec(pod: dict[str, Any], **spark: Any) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "image": "registry.example.com/team-a/orders:1",
            "source": {"kafka": {"bootstrapServers": "kafka:9092", "topics": ["orders"]}},
            "transform": {"entrypoint": "orders.transform:run"},
            "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
            "spark": {"executors": {"instances": 0}, "pod": pod, **spark},
        }
    )


FULL: dict[str, Any] = {
    "env": [
        {"name": "TZ", "value": "UTC"},
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
    ],
    "envFrom": [{"configMapRef": {"name": "orders-config"}, "prefix": "ORDERS_"}],
    "volumes": [
        {
            "name": "ca",
            "secret": {"secretName": "ca-bundle", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
        },
        {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
    ],
    "volumeMounts": [
        {"name": "ca", "mountPath": "/etc/orders/ca", "readOnly": True},
        {"name": "cache", "mountPath": "/var/cache/orders"},
    ],
    "imagePullSecrets": ["registry-team-a"],
    "imagePullPolicy": "Always",
    "labels": {"team": "a", "cost-center": "42"},
    "annotations": {"example.com/owner": "orders@example.com"},
    "priorityClassName": "pipelines-high",
}


def test_the_driver_pod_carries_every_pod_setting() -> None:
    pod = builders.driver_pod(OWNER, spec(FULL), 3, "hash")
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["TZ"]["value"] == "UTC"
    assert env["API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "api",
        "key": "token",
        "optional": False,
    }
    assert container["envFrom"] == [
        {"prefix": "ORDERS_", "configMapRef": {"name": "orders-config", "optional": False}}
    ]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["ca"]["secret"]["secretName"] == "ca-bundle"
    assert volumes["cache"]["emptyDir"] == {"sizeLimit": "1Gi"}
    assert "scratch" in volumes
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/orders/ca"] == {
        "name": "ca",
        "mountPath": "/etc/orders/ca",
        "readOnly": True,
    }
    assert mounts["/tmp"]["name"] == "scratch"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "registry-team-a"}]
    assert container["imagePullPolicy"] == "Always"
    assert pod["spec"]["priorityClassName"] == "pipelines-high"
    assert pod["metadata"]["labels"]["team"] == "a"
    assert pod["metadata"]["annotations"]["example.com/owner"] == "orders@example.com"


def test_pod_settings_leave_the_restricted_security_context_and_the_operators_names() -> None:
    plain = builders.driver_pod(OWNER, spec({}), 3, "hash")
    full = builders.driver_pod(OWNER, spec(FULL), 3, "hash")
    assert full["spec"]["securityContext"] == plain["spec"]["securityContext"]
    assert (
        full["spec"]["containers"][0]["securityContext"]
        == plain["spec"]["containers"][0]["securityContext"]
    )
    assert full["spec"]["serviceAccountName"] == plain["spec"]["serviceAccountName"]
    for key, value in plain["metadata"]["labels"].items():
        assert full["metadata"]["labels"][key] == value
    ours = [e["name"] for e in plain["spec"]["containers"][0]["env"]]
    assert [e["name"] for e in full["spec"]["containers"][0]["env"]][: len(ours)] == ours


def test_without_pod_settings_the_pod_is_as_before() -> None:
    pod = builders.driver_pod(OWNER, spec({}), 1, "hash")
    assert "imagePullSecrets" not in pod["spec"]
    assert "priorityClassName" not in pod["spec"]
    assert pod["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {"sizeLimit": "2Gi"}}]
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


REFUSED = {
    "reserved env": ({"env": [{"name": "SLUICE_EPOCH", "value": "9"}]}, "may not set SLUICE_EPOCH"),
    "spark env": ({"env": [{"name": "SPARK_CONF", "value": "{}"}]}, "may not set SPARK_CONF"),
    "home": ({"env": [{"name": "HOME", "value": "/"}]}, "may not set HOME"),
    # Issue 38, finding 4: each of these loads code the image does not hold.
    **{
        f"code through {name}": ({"env": [{"name": name, "value": "x"}]}, f"may not set {name}")
        for name in (
            "JAVA_TOOL_OPTIONS",
            "JDK_JAVA_OPTIONS",
            "_JAVA_OPTIONS",
            "LD_PRELOAD",
            "PYTHONPATH",
            "HADOOP_CONF_DIR",
            "CLASSPATH",
            "PATH",
        )
    },
    **{
        f"envFrom prefix {prefix}": (
            {"envFrom": [{"prefix": prefix, "configMapRef": {"name": "c"}}]},
            f"envFrom prefix {prefix} can make a reserved name",
        )
        for prefix in ("SLUICE_", "S", "SPARK_CONF_", "LD", "PYTHON", "JAVA_TOOL_", "_")
    },
    "value and valueFrom": (
        {
            "env": [
                {
                    "name": "A",
                    "value": "1",
                    "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                }
            ]
        },
        "not both",
    ),
    "hostPath": ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, "hostPath"),
    "no source": ({"volumes": [{"name": "v"}]}, "exactly one of"),
    "scratch volume": ({"volumes": [{"name": "scratch", "emptyDir": {}}]}, "own scratch space"),
    "spark local-dir volume": (
        {"volumes": [{"name": "spark-local-dir-1", "emptyDir": {}}]},
        "own scratch space",
    ),
    "mount of no volume": (
        {"volumeMounts": [{"name": "x", "mountPath": "/etc/x"}]},
        "names a volume that spark.pod.volumes does not have",
    ),
    # Issue 38, finding 8: these passed as other paths than the runtime's /tmp.
    **{
        f"mount at {path}": (
            {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "volumeMounts": [{"name": "v", "mountPath": path}],
            },
            "empty, '.' or '..' segment",
        )
        for path in ("//tmp", "/./tmp", "/var/../tmp", "/etc//x")
    },
    **{
        f"mount over {path}": (
            {
                "volumes": [{"name": "v", "configMap": {"name": "c"}}],
                "volumeMounts": [{"name": "v", "mountPath": path, "subPath": "f"}],
            },
            "a file the kubelet writes",
        )
        for path in ("/etc/hosts", "/etc/resolv.conf", "/dev/termination-log")
    },
    "system priority class": (
        {"priorityClassName": "system-cluster-critical"},
        "system-\\* classes belong to the cluster",
    ),
    "mount over scratch": (
        {
            "volumes": [{"name": "v", "emptyDir": {}}],
            "volumeMounts": [{"name": "v", "mountPath": "/tmp"}],
        },
        "scratch space",
    ),
    "path escapes": (
        {
            "volumes": [
                {"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": "../x"}]}}
            ]
        },
        "'..'",
    ),
    "reserved label": ({"labels": {"sluice.dev/epoch": "1"}}, "set by the operator"),
    "managed-by label": ({"labels": {"app.kubernetes.io/managed-by": "me"}}, "set by the operator"),
    "bad label key": ({"labels": {"a b": "c"}}, "not a label or annotation key"),
    "privileged": ({"securityContext": {"privileged": True}}, "securityContext"),
}


@pytest.mark.parametrize(("pod", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_pod_settings_name_the_problem(pod: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        spec(pod)


def test_names_and_prefixes_near_the_reserved_ones_are_accepted() -> None:
    """The reserved list refuses what makes a reserved name, not its neighbours."""
    accepted = spec(
        {
            "env": [{"name": n, "value": "1"} for n in ("TZ", "APP_PATH", "MY_SPARK_HOME")],
            "envFrom": [
                {"prefix": p, "configMapRef": {"name": "c"}} for p in ("APP_", "ORDERS_", "PATHS_")
            ],
        }
    )
    assert [e.prefix for e in accepted.spark.pod.env_from] == ["APP_", "ORDERS_", "PATHS_"]


# -- what a driver pod may use of its node and of the API server (issue 22) ----------


def test_by_default_spark_runs_in_the_driver_pod_which_gets_no_token() -> None:
    pod = builders.driver_pod(OWNER, spec({}, executors={}), 1, "h")  # the default count
    assert pod["spec"]["automountServiceAccountToken"] is False
    env = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
    assert "SLUICE_SPARK_MASTER" not in env  # local mode: nothing to ask the API server


def test_only_a_driver_with_executor_pods_gets_its_token() -> None:
    pod = builders.driver_pod(OWNER, spec({}, executors={"instances": 2}), 1, "h")
    assert pod["spec"]["automountServiceAccountToken"] is True


def test_scratch_space_is_bounded_on_disk_and_in_the_pods_storage_request() -> None:
    pod = builders.driver_pod(OWNER, spec({}, driver={"scratch": "10Gi"}), 1, "h")
    (scratch,) = [v for v in pod["spec"]["volumes"] if v["name"] == "scratch"]
    assert scratch["emptyDir"] == {"sizeLimit": "10Gi"}
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"]["ephemeral-storage"] == "10Gi"
    assert resources["limits"]["ephemeral-storage"] == "10Gi"
    default = builders.driver_pod(OWNER, spec({}), 1, "h")
    assert default["spec"]["volumes"][0]["emptyDir"] == {"sizeLimit": "2Gi"}


def test_a_driver_without_executors_gets_no_rights_and_one_with_them_the_shipped_role() -> None:
    alone = builders.supporting(OWNER, spec({}, executors={}))
    assert [m["kind"] for m in alone] == ["ServiceAccount", "Service"]
    with_executors = spec({}, executors={"instances": 2})
    objects = builders.supporting(OWNER, with_executors, "rel-sluice-driver")
    binding = next(m for m in objects if m["kind"] == "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "rel-sluice-driver",
    }
    assert binding["subjects"][0]["name"] == "orders-driver"
    executor = next(m for m in objects if m["metadata"]["name"] == "orders-executor")
    assert executor["automountServiceAccountToken"] is False
    conf = builders.spark_kubernetes_conf(OWNER, with_executors, 3)
    assert conf["spark.kubernetes.authenticate.executor.serviceAccountName"] == "orders-executor"
    template = builders.executor_pod_template(OWNER, with_executors, 3)
    assert template["metadata"]["labels"]["sluice.dev/role"] == "executor"  # policies
    assert not any(m["kind"] == "Role" for m in objects)  # the operator creates no Role
