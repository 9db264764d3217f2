"""The driver's Spark configuration: micro-batch defaults, operator settings, user
overrides, in that order of precedence (later wins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
from pydantic import ValidationError

from sluice_api.spark_conf import SPARK_CONF_KEYS, SPARK_CONF_PREFIXES
from sluice_api.spec import PipelineSpec
from sluice_dev.paths import REPO_ROOT
from sluice_job.spark import lower_own_thread, spark_conf, ui_env, without_class_archive

pytestmark = pytest.mark.unit

SPEC = PipelineSpec.model_validate(
    {
        "image": "i",
        "source": {"kafka": {"bootstrapServers": "k:1", "topics": ["t"]}},
        "transform": {"entrypoint": "m:f"},
        "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
        "spark": {"driver": {"cores": 3}, "conf": {"spark.locality.wait": "1s"}},
    }
)


def test_local_defaults_suit_micro_batches() -> None:
    conf = spark_conf(SPEC, {}, "app", "/usr/bin/python3")
    assert conf["spark.master"] == "local[3]"
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.pyspark.python"] == "/usr/bin/python3"


def test_the_users_tuning_wins_over_the_defaults_and_the_operators_settings_over_all() -> None:
    env = {
        "SLUICE_SPARK_MASTER": "k8s://https://kubernetes.default.svc:443",
        "SLUICE_SPARK_CONF": json.dumps(
            {"spark.kubernetes.driver.pod.name": "p-driver-4", "spark.network.timeout": "60s"}
        ),
    }
    spec = PipelineSpec.model_validate(
        {
            **SPEC.model_dump(by_alias=True),
            "spark": {"conf": {"spark.locality.wait": "1s", "spark.network.timeout": "1s"}},
        }
    )
    conf = spark_conf(spec, env, "app", "python")
    assert conf["spark.kubernetes.driver.pod.name"] == "p-driver-4"
    assert conf["spark.locality.wait"] == "1s"
    assert conf["spark.network.timeout"] == "60s"
    assert conf["spark.master"].startswith("k8s://")


@pytest.mark.parametrize(
    "key",
    [
        "spark.master",
        "spark.kubernetes.authenticate.driver.serviceAccountName",
        "spark.kubernetes.driver.secrets.db",
        "spark.kubernetes.executor.volumes.hostPath.root.mount.path",
        "spark.jars",
        "spark.jars.packages",
        "spark.plugins",
        "spark.driver.extraJavaOptions",
        "spark.executor.extraJavaOptions",
        "spark.sql.extensions",
        "spark.sql.catalog.evil",
        "spark.sql.queryExecutionListeners",
    ],
)
def test_a_setting_that_is_the_operators_is_refused_naming_it(key: str) -> None:
    """Issue 22, item 1: the user's map was applied last and any ``spark.`` key was
    accepted, so a manifest could pick the master, a ServiceAccount, Secrets, host
    paths, jars or plugins."""
    with pytest.raises(ValidationError, match=f"spark.conf may not set {key} "):
        PipelineSpec.model_validate(
            {**SPEC.model_dump(by_alias=True), "spark": {"conf": {key: "x"}}}
        )


def with_spark(**spark: Any) -> PipelineSpec:
    """``SPEC`` with another ``spark`` section."""
    return PipelineSpec.model_validate({**SPEC.model_dump(by_alias=True), "spark": spark})


def test_micro_batches_wait_for_no_locality_and_keep_little_job_history() -> None:
    conf = spark_conf(with_spark(), {}, "app", "python")
    assert conf["spark.locality.wait"] == "0s"
    assert int(conf["spark.ui.retainedJobs"]) <= 100
    assert int(conf["spark.sql.ui.retainedExecutions"]) <= 100


def test_shuffle_partitions_follow_the_executor_cores_on_a_cluster() -> None:
    spec = with_spark(executors={"instances": 3, "cores": 4})
    conf = spark_conf(spec, {"SLUICE_SPARK_MASTER": "k8s://https://kube:443"}, "app", "python")
    assert conf["spark.sql.shuffle.partitions"] == "12"
    assert conf["spark.default.parallelism"] == "12"


def test_local_mode_sets_no_executors_so_zero_executor_pods_is_accepted() -> None:
    conf = spark_conf(with_spark(executors={"instances": 0}), {}, "app", "python")
    assert conf["spark.master"].startswith("local[")
    assert not [key for key in conf if key.startswith("spark.executor.")]


def test_executors_are_sized_on_a_cluster() -> None:
    spec = with_spark(executors={"instances": 3, "cores": 4, "memory": "3g"})
    conf = spark_conf(spec, {"SLUICE_SPARK_MASTER": "k8s://https://kube:443"}, "app", "python")
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.executor.cores"] == "4"
    assert conf["spark.executor.memory"] == "3g"


def test_the_tuning_page_lists_every_setting_a_pipeline_may_set() -> None:
    page = (REPO_ROOT / "docs" / "tuning.md").read_text()
    listed = page[page.index("## What `spec.spark.conf` may set") :]
    for key in SPARK_CONF_KEYS:
        assert f"`{key}`" in listed
    for prefix in SPARK_CONF_PREFIXES:
        assert f"`{prefix}*`" in listed


@pytest.mark.parametrize(
    ("conf", "says"),
    [
        (
            {"spark.sql.adaptive.customCostEvaluatorClass": "com.x.Evil"},
            "may not set spark.sql.adaptive.customCostEvaluatorClass",
        ),
        ({"spark.io.compression.codec": "com.x.EvilCodec"}, "not 'com.x.EvilCodec'"),
    ],
    ids=["class in an allowed family", "codec class"],
)
def test_a_setting_that_loads_a_class_is_refused(conf: dict[str, str], says: str) -> None:
    """Issue 38, finding 8: ``spark.sql.adaptive.*`` was allowed as a family, and the
    codec setting takes a class name; either had Spark load a class of the tenant's
    choosing."""
    with pytest.raises(ValidationError, match=says):
        PipelineSpec.model_validate({**SPEC.model_dump(by_alias=True), "spark": {"conf": conf}})


def test_the_codecs_short_names_are_accepted() -> None:
    for codec in ("lz4", "lzf", "snappy", "zstd"):
        spec = PipelineSpec.model_validate(
            {
                **SPEC.model_dump(by_alias=True),
                "spark": {"conf": {"spark.io.compression.codec": codec}},
            }
        )
        assert spec.spark.conf["spark.io.compression.codec"] == codec


def test_a_local_drivers_rpc_listens_on_loopback_authenticated_and_encrypted() -> None:
    """Issue 38, finding 7: on the old code a default (local-mode) driver set none of
    these, and its RPC endpoint and block manager listened on the host's address
    without authentication (tests/integration/test_driver_rpc.py shows the sockets)."""
    conf = spark_conf(SPEC, {}, "app", "python")
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.authenticate"] == "true"
    assert conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.ui.killEnabled"] == "false"


def test_with_executors_the_rpc_address_is_the_operators() -> None:
    operator = {"spark.driver.bindAddress": "10.0.0.7", "spark.driver.host": "10.0.0.7"}
    env = {
        "SLUICE_SPARK_MASTER": "k8s://https://kubernetes.default.svc:443",
        "SLUICE_SPARK_CONF": json.dumps(operator | {"spark.authenticate": "true"}),
    }
    conf = spark_conf(SPEC, env, "app", "python")
    assert conf["spark.driver.bindAddress"] == "10.0.0.7"
    assert conf["spark.driver.host"] == "10.0.0.7"


def test_the_ui_listens_on_loopback_unless_the_operator_says_the_platform_allows_more() -> None:
    """Spark binds its UI to SPARK_LOCAL_IP, or to every address (the old code: a UI
    turned on by spark.conf or spec.spark.ui listened on *:4040, kill links included)."""
    assert ui_env({}) == {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert ui_env({"SLUICE_UI_ON_NETWORK": "false"}) == {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert ui_env({"SLUICE_UI_ON_NETWORK": "true"}) == {}


@pytest.mark.parametrize(
    ("jit", "driver", "executors"),
    [
        ({}, "-XX:TieredStopAtLevel=1", "-XX:TieredStopAtLevel=1"),
        ({"jit": "C1"}, "-XX:TieredStopAtLevel=1", "-XX:TieredStopAtLevel=1"),
        ({"jit": "Tiered"}, None, None),
    ],
)
def test_the_jvms_compile_with_c1_only_unless_the_spec_asks_for_tiered(
    jit: dict[str, str], driver: str | None, executors: str | None
) -> None:
    """A cold driver's start and first batch cost 11.2 JVM CPU-seconds with C1 only
    against 17.4-18.8 with both compilers, and its batches after 600,000 records 0.82
    against 1.08 (docs/tuning.md): C1 only by default, for the driver and the
    executors' JVMs; Tiered is the JVM's own default."""
    spec = with_spark(executors={"instances": 2, "cores": 1}, **jit)
    cluster = spark_conf(spec, {"SLUICE_SPARK_MASTER": "k8s://https://kube:443"}, "app", "python")
    assert cluster.get("spark.driver.extraJavaOptions") == driver
    assert cluster.get("spark.executor.extraJavaOptions") == executors
    local = spark_conf(with_spark(executors={"instances": 0}, **jit), {}, "app", "python")
    assert local.get("spark.driver.extraJavaOptions") == driver


@pytest.mark.parametrize(
    ("jit", "driver"),
    [
        ({}, "-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile=/opt/sluice/spark.jsa"),
        ({"jit": "Tiered"}, "-XX:SharedArchiveFile=/opt/sluice/spark.jsa"),
    ],
)
def test_the_driver_maps_the_images_class_archive_and_the_executors_do_not(
    jit: dict[str, str], driver: str
) -> None:
    """The image's class archive (``SLUICE_SPARK_CLASS_ARCHIVE``) goes to the driver's
    JVM beside the JIT option; executors start with another class path, which it was
    not made for, so theirs keep the JIT option alone."""
    archive = {"SLUICE_SPARK_CLASS_ARCHIVE": "/opt/sluice/spark.jsa"}
    spec = with_spark(executors={"instances": 2, "cores": 1}, **jit)
    env = {"SLUICE_SPARK_MASTER": "k8s://https://kube:443", **archive}
    cluster = spark_conf(spec, env, "app", "python")
    assert cluster["spark.driver.extraJavaOptions"] == driver
    assert cluster.get("spark.executor.extraJavaOptions") == (
        None if jit else "-XX:TieredStopAtLevel=1"
    )
    local = spark_conf(with_spark(executors={"instances": 0}, **jit), archive, "app", "python")
    assert local["spark.driver.extraJavaOptions"] == driver


def test_a_jvm_that_did_not_start_with_the_archive_starts_again_without_only_that_option() -> None:
    conf = {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile=/a.jsa",
        "spark.master": "local[1]",
    }
    assert without_class_archive(conf) == {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "spark.master": "local[1]",
    }
    alone = {"spark.driver.extraJavaOptions": "-XX:SharedArchiveFile=/a.jsa"}
    assert without_class_archive(alone) == {}
    assert without_class_archive({"spark.master": "local[1]"}) == {"spark.master": "local[1]"}


def test_a_thread_made_nicer_launches_nicer_processes_and_leaves_the_others() -> None:
    """What ``Launch`` relies on: niceness is per thread on Linux and a process
    inherits its forking thread's, so the JVM is nicer than the driver's main thread."""
    launched: dict[str, int] = {}

    def launch() -> None:
        lower_own_thread(7)
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"],
            capture_output=True,
            text=True,
            check=True,
        )
        launched["child"] = int(child.stdout)
        lower_own_thread(3)  # never lowers what it raised
        launched["after"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = threading.Thread(target=launch)
    thread.start()
    thread.join()
    assert launched == {"child": max(before, 7), "after": max(before, 7)}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
