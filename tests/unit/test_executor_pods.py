"""Executor pods: what the operator tells Spark about them, and the image's executor role.

What a user checks: executors carry the pipeline's pod settings and the restricted
security context, are named after the pipeline and the driver's epoch, are owned by
(and so deleted with) the driver pod, and the job image starts Spark's executor backend
from the variables Spark's scheduler sets, as Spark's own image does."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from sluice_api.spec import PipelineSpec
from sluice_job import cli, executor_backend, spark, spark_auth
from sluice_operator import builders, naming

pytestmark = pytest.mark.unit

OWNER = builders.Owner("orders", "team-a", "uid-1", "cluster-1")


def spec(**spark_settings: Any) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "image": "registry.example.com/team-a/orders:1",
            "source": {"kafka": {"bootstrapServers": "kafka:9092", "topics": ["orders"]}},
            "transform": {"entrypoint": "orders.transform:run"},
            "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
            "spark": {"executors": {"instances": 2, "scratch": "3Gi"}, **spark_settings},
        }
    )


POD = {
    "env": [{"name": "TZ", "value": "UTC"}],
    "envFrom": [{"configMapRef": {"name": "orders-config"}}],
    "volumes": [{"name": "ca", "secret": {"secretName": "ca-bundle"}}],
    "volumeMounts": [{"name": "ca", "mountPath": "/etc/orders/ca", "readOnly": True}],
    "imagePullSecrets": ["registry-team-a"],
    "labels": {"team": "a"},
    "annotations": {"example.com/owner": "orders@example.com"},
    "priorityClassName": "pipelines-high",
}


def test_executor_template_is_restricted_and_carries_the_pod_settings() -> None:
    template = builders.executor_pod_template(OWNER, spec(pod=POD), 4)
    pod_spec = template["spec"]
    [container] = pod_spec["containers"]
    assert container["name"] == "executor"  # spark.kubernetes.executor.podTemplateContainerName
    # Jars are fetched into the working directory: the scratch emptyDir's mount itself,
    # writable by the pod's group. A directory below it does not exist when the
    # container starts, and runc makes it as root, 0755: on a real node every
    # executor failed to fetch the Kafka connector there ("Unable to create executor
    # due to ./kafka-clients-3.9.2.jar") until the driver gave up.
    assert container["workingDir"] == "/tmp"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec["automountServiceAccountToken"] is False
    # Writable scratch: /tmp, and Spark's local dirs where the driver keeps its own.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/tmp"] == "scratch"
    assert mounts["/tmp/spark"] == "spark-local-dir-1"
    assert mounts["/etc/orders/ca"] == "ca"
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    assert volumes["spark-local-dir-1"]["emptyDir"] == {"sizeLimit": "3Gi"}
    assert volumes["ca"]["secret"]["secretName"] == "ca-bundle"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env == {"HOME": "/tmp", "TZ": "UTC", "SLUICE_SPARK_AUTH_SECRET": None}
    assert container["envFrom"][0]["configMapRef"]["name"] == "orders-config"
    assert pod_spec["imagePullSecrets"] == [{"name": "registry-team-a"}]
    assert pod_spec["priorityClassName"] == "pipelines-high"
    labels = template["metadata"]["labels"]
    assert labels["team"] == "a"
    assert labels["sluice.dev/role"] == "executor"
    assert labels["sluice.dev/epoch"] == "4"
    assert template["metadata"]["annotations"]["example.com/owner"] == "orders@example.com"


def test_executors_on_a_lost_node_are_evicted_after_the_failover_time() -> None:
    settings = spec(
        executors={"instances": 2, "tolerations": [{"key": "gpu", "operator": "Exists"}]}
    )
    lost = settings.model_copy(
        update={"failover": settings.failover.model_copy(update={"node_lost_seconds": 7})}
    )
    tolerations = builders.executor_pod_template(OWNER, lost, 1)["spec"]["tolerations"]
    assert {"key": "gpu", "operator": "Exists"} in tolerations
    for taint in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"):
        assert {
            "key": taint,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 7,
        } in tolerations


def test_executors_never_match_the_drivers_selector() -> None:
    """The operator watches driver pods, and the Service selects them: executors must
    not be taken for drivers."""
    labels = builders.executor_pod_template(OWNER, spec(), 1)["metadata"]["labels"]
    selector = naming.selector(OWNER.name)
    assert not all(labels.get(k) == v for k, v in selector.items())


def test_executor_template_gets_no_credentials() -> None:
    """Sinks get their credentials with the task: executor pods name no Secret the
    pipeline's connections use."""
    secured = spec().model_dump(by_alias=True, exclude_none=True)
    secured["sink"]["cassandra"]["credentialsSecret"] = "cassandra-login"
    template = builders.executor_pod_template(OWNER, PipelineSpec.model_validate(secured), 1)
    assert "cassandra-login" not in json.dumps(template)


def test_spark_rpc_secret_is_a_reference_in_both_pods_and_a_secret_of_the_pipeline() -> None:
    """Spark's RPC secret never appears in a pod spec (anyone who may read pods could
    read it): driver and executors get a secretKeyRef to ``<pipeline>-spark-auth``,
    which the operator creates first and which the driver's account cannot read."""
    reference = {
        "name": "SLUICE_SPARK_AUTH_SECRET",
        "valueFrom": {"secretKeyRef": {"name": "orders-spark-auth", "key": "secret"}},
    }
    template = builders.executor_pod_template(OWNER, spec(), 2)
    assert reference in template["spec"]["containers"][0]["env"]
    driver = builders.driver_pod(OWNER, spec(), 2, "hash")["spec"]["containers"][0]
    assert reference in driver["env"]
    [first, *_] = builders.supporting(OWNER, spec())
    assert (first["kind"], first["metadata"]["name"]) == ("Secret", "orders-spark-auth")
    assert "data" not in first  # made when created (kube.fresh_secret), not in the spec
    assert first["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    local = spec(executors={"instances": 0})
    assert "SLUICE_SPARK_AUTH_SECRET" not in json.dumps(builders.driver_pod(OWNER, local, 1, "h"))
    assert [m["kind"] for m in builders.supporting(OWNER, local)] == ["ServiceAccount", "Service"]


def test_driver_and_executor_read_the_rpc_secret_from_one_file_not_the_environment(
    tmp_path: Path,
) -> None:
    env = {
        "SLUICE_NAMESPACE": "team-a",
        "SLUICE_PIPELINE": "orders",
        "SLUICE_EPOCH": "3",
        "SLUICE_SPARK_AUTH_SECRET": "s3cr3t",
    }
    conf = spark_auth.driver_conf(env, tmp_path)
    path = Path(conf["spark.authenticate.secret.file"])
    assert path.read_text() == "s3cr3t"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.name == "sluice-spark-auth-team-a-orders-3"  # one per driver
    assert spark_auth.driver_conf({}, tmp_path) == {}  # local mode: Spark's own default

    # The executor: Spark passes the setting as a JVM option; the secret goes to that
    # file and the JVM gets no environment variable holding it.
    path.unlink()
    executor_env = {**SPARK_ENV, "SLUICE_SPARK_AUTH_SECRET": "s3cr3t"}
    executor_env["SPARK_JAVA_OPT_3"] = f"-Dspark.authenticate.secret.file={path}"
    executor_env |= {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    argv = executor_backend.command(executor_env, Path("/opt/venv/pyspark"))
    # Spark reads a secret file only under a Kubernetes master, which an executor's
    # start-up options lack: the role adds its cluster's.
    assert "-Dspark.master=k8s://https://10.96.0.1:443" in argv
    assert argv.index("-Dspark.master=k8s://https://10.96.0.1:443") < argv.index("-cp")
    assert "-Dspark.master" not in " ".join(executor_backend.command(SPARK_ENV, Path("/x")))
    launched = spark_auth.write_for_executor(executor_env, argv)
    assert path.read_text() == "s3cr3t"
    assert "SLUICE_SPARK_AUTH_SECRET" not in launched
    assert launched["SPARK_DRIVER_URL"] == SPARK_ENV["SPARK_DRIVER_URL"]


def _sha(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:6]


@pytest.mark.parametrize(
    ("pipeline", "epoch", "prefix"),
    [
        ("orders", 3, "orders-e3"),
        ("a" * 45, 12, "a" * 36 + "-" + _sha("a" * 45) + "-e12"),
        ("eu.orders", 1, "eu-orders-e1"),
        ("x" * 44, 1234567890, "x" * 28 + "-" + _sha("x" * 44) + "-e1234567890"),
    ],
)
def test_executor_pods_are_named_after_pipeline_and_epoch(
    pipeline: str, epoch: int, prefix: str
) -> None:
    assert naming.executor_pod_prefix(pipeline, epoch) == prefix
    assert len(prefix) <= 47  # Spark's limit: <prefix>-exec-<id> within 63


def test_pipelines_that_share_their_start_never_share_executor_pod_names() -> None:
    """Names of up to 45 characters are cut to fit the executor prefix (47 with the
    epoch): on the old code ``"a" * 44 + "b"`` and ``"a" * 44 + "c"`` both named their
    executors ``aaaa...a-e1-exec-<n>`` in one namespace, so each pipeline's executor
    pods collided with the other's (409)."""
    first, second = "a" * 44 + "b", "a" * 44 + "c"
    for epoch in (1, 12, 1234567890):
        names = {naming.executor_pod_prefix(p, epoch) for p in (first, second)}
        assert len(names) == 2
        assert all(len(name) <= 47 and name.endswith(f"-e{epoch}") for name in names)
    assert naming.driver_pod(first, 3) != naming.driver_pod(second, 3)
    assert naming.service_account(first) != naming.service_account(second)


def test_driver_in_client_mode_creates_no_configmap_and_no_volume_claim() -> None:
    """The driver's account is bound to pods only (the chart's ClusterRole)."""
    conf = builders.spark_kubernetes_conf(OWNER, spec(), 2)
    assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"
    assert conf["spark.kubernetes.driver.ownPersistentVolumeClaim"] == "false"
    assert conf["spark.kubernetes.driver.service.deleteOnTermination"] == "false"
    assert conf["spark.kubernetes.namespace"] == "team-a"
    assert conf["spark.kubernetes.container.image"] == "registry.example.com/team-a/orders:1"
    chart = (Path(__file__).parents[2] / "charts/sluice/templates/_helpers.tpl").read_text()
    rules = chart.split('define "sluice.driverRules"')[1].split("{{- end }}")[0]
    assert "resources: [pods]" in rules


def test_the_driver_writes_the_template_spark_reads(tmp_path: Path) -> None:
    template = builders.executor_pod_template(OWNER, spec(), 2)
    env = {"SLUICE_EXECUTOR_POD_TEMPLATE": json.dumps(template)}
    conf = spark.executor_template(env, tmp_path)
    path = Path(conf["spark.kubernetes.executor.podTemplateFile"])
    assert json.loads(path.read_text()) == template
    assert spark.executor_template({}, tmp_path) == {}  # local mode: no template


SPARK_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
    "SPARK_EXECUTOR_ID": "2",
    "SPARK_EXECUTOR_CORES": "1",
    "SPARK_EXECUTOR_MEMORY": "1024m",
    "SPARK_APPLICATION_ID": "spark-application-1",
    "SPARK_EXECUTOR_POD_IP": "10.0.1.9",
    "SPARK_EXECUTOR_POD_NAME": "orders-e3-exec-2",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_CONF_DIR": "/opt/spark/conf",
    "SPARK_JAVA_OPT_10": "-Dspark.driver.port=7078",
    "SPARK_JAVA_OPT_2": "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "SPARK_JAVA_OPT_1": "-XX:+IgnoreUnrecognizedVMOptions",
    "JAVA_HOME": "/opt/java/openjdk",
}


def test_executor_command_is_what_sparks_entrypoint_runs() -> None:
    argv = executor_backend.command(SPARK_ENV, Path("/opt/venv/pyspark"))
    assert argv[:4] == [
        "/opt/java/openjdk/bin/java",
        "-XX:+IgnoreUnrecognizedVMOptions",  # SPARK_JAVA_OPT_<n> in numeric order
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "-Dspark.driver.port=7078",
    ]
    assert argv[4:6] == ["-Xms1024m", "-Xmx1024m"]
    assert argv[6:8] == ["-cp", "/opt/spark/conf:/opt/venv/pyspark/jars/*"]
    assert argv[8] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    options = dict(zip(argv[9::2], argv[10::2], strict=True))
    assert options == {
        "--driver-url": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
        "--executor-id": "2",
        "--cores": "1",
        "--app-id": "spark-application-1",
        "--hostname": "10.0.1.9",
        "--resourceProfileId": "0",
        "--podName": "orders-e3-exec-2",
    }


def test_executor_role_outside_a_spark_pod_names_what_is_missing() -> None:
    partial = {k: v for k, v in SPARK_ENV.items() if k != "SPARK_DRIVER_URL"}
    with pytest.raises(executor_backend.ExecutorEnvError, match="SPARK_DRIVER_URL"):
        executor_backend.command(partial, Path("/x"))
    assert cli.main(["executor"]) == 2  # the test's environment has no SPARK_* variables


def test_the_installed_pyspark_has_the_executor_backend() -> None:
    jars = executor_backend.spark_home({}) / "jars"
    assert list(jars.glob("spark-kubernetes_*.jar"))
    assert list(jars.glob("kubernetes-client-*.jar"))


def test_executors_have_their_own_placement_not_the_drivers() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "sluice.dev/role", "operator": "In", "values": ["executor"]}
                        ]
                    },
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    settings = spec(
        driver={"nodeSelector": {"pool": "drivers"}},
        executors={"instances": 2, "nodeSelector": {"pool": "workers"}, "affinity": anti},
    )
    template = builders.executor_pod_template(OWNER, settings, 1)["spec"]
    assert template["nodeSelector"] == {"pool": "workers"}
    assert template["affinity"] == anti
    driver = builders.driver_pod(OWNER, settings, 1, "h")["spec"]
    assert driver["nodeSelector"] == {"pool": "drivers"}
    assert "affinity" not in driver


def test_executor_pods_may_name_exactly_the_secrets_of_their_template() -> None:
    """``status.executorSecrets``, which the chart's admission policy reads: the
    pipeline's RPC secret and the Secrets of spark.pod (consent-checked by the
    operator), never a connection's credentials; none without executors."""
    pod = {
        **POD,
        "env": [
            {"name": "K", "valueFrom": {"secretKeyRef": {"name": "region-key", "key": "k"}}},
            {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "config", "key": "c"}}},
        ],
        "envFrom": [{"secretRef": {"name": "env-all"}}, {"configMapRef": {"name": "more"}}],
    }
    secured = spec(pod=pod).model_dump(by_alias=True, exclude_none=True)
    secured["sink"]["cassandra"]["credentialsSecret"] = "cassandra-login"
    allowed = builders.executor_secrets(OWNER, PipelineSpec.model_validate(secured))
    assert allowed == ("ca-bundle", "env-all", "orders-spark-auth", "region-key", "registry-team-a")
    template = builders.executor_pod_template(OWNER, PipelineSpec.model_validate(secured), 3)
    assert builders.pod_secrets(template) == allowed
    assert builders.executor_secrets(OWNER, spec(executors={"instances": 0})) == ()


def test_pod_secrets_reads_every_field_that_names_a_secret() -> None:
    pod = {
        "spec": {
            "volumes": [
                {"name": "a", "secret": {"secretName": "vol"}},
                {"name": "b", "projected": {"sources": [{"secret": {"name": "proj"}}]}},
                {"name": "c", "configMap": {"name": "not-a-secret"}},
            ],
            "containers": [
                {
                    "name": "x",
                    "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "env"}}}],
                }
            ],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init"}}]}],
            "imagePullSecrets": [{"name": "pull"}],
        }
    }
    assert builders.pod_secrets(pod) == ("env", "init", "proj", "pull", "vol")
