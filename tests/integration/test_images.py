"""The product's images, built from Dockerfile.job and Dockerfile.operator with podman
(``make images``) and run as the operator and the chart run them: the user and group
of the pod, a read-only root filesystem, every capability dropped, no privilege
escalation, the memory limit, the scratch emptyDir owned by ``fsGroup``, the
termination message file.

What only a real image shows: the driver's Python, PySpark and Java start inside it
and find the connector jars, Hadoop's login finds the image's user for uid 185, the
entrypoint and ``PATH`` are the ones the pod builder assumes, and the operator image
runs its command against a real API server. A build whose hashed list has been
tampered with fails, naming the package.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice_api.spec import PipelineSpec
from sluice_dev.events import EventFactory
from sluice_dev.oci import images
from sluice_dev.oci.podman import Podman, PodmanError
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.produce import produce
from sluice_operator import builders
from tests.support import state
from tests.support.agents import free_port
from tests.support.operator import Pipeline, standin_spec
from tests.support.podrun import PodContainer, image_run, readable_copy, run_pod
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

EVENTS_TABLE = """CREATE TABLE IF NOT EXISTS {keyspace}.events (event_id text PRIMARY KEY,
    seq bigint, page text, action text, user_id text, event_time timestamp,
    source_topic text, source_partition int, source_offset bigint)"""


@pytest.fixture(scope="session")
def podman(layout: Layout) -> Podman:
    tool = Podman.for_layout(layout)
    why = tool.available()
    if why is not None:
        pytest.fail(f"cannot build images: {why}; run `make images`")
    return tool


@pytest.fixture(scope="session")
def product_images(podman: Podman) -> dict[str, images.Built]:
    """Both images, built unless ``make images`` already built this source."""
    return {recipe.name: images.build(podman, recipe) for recipe in images.RECIPES}


@pytest.fixture
def containers() -> Iterator[list[PodContainer]]:
    started: list[PodContainer] = []
    yield started
    for container in started:
        container.remove()


def driver_pod(spec: dict[str, Any], pipeline: str, epoch: int = 1) -> dict[str, Any]:
    """The driver pod the operator builds for ``spec``."""
    owner = builders.Owner(pipeline, "tests", "uid-1", "test-cluster")
    pod = builders.driver_pod(owner, PipelineSpec.model_validate(spec), epoch, "hash")
    pod["metadata"].setdefault("namespace", "tests")
    return pod


def test_the_job_images_driver_commits_and_stops_cleanly_as_the_operator_runs_it(
    podman: Podman,
    product_images: dict[str, images.Built],
    kafka_bootstrap: str,
    kafka_topic: Callable[..., str],
    cassandra: Any,
    cassandra_contact: str,
    cassandra_keyspace: str,
    unique_name: Callable[[str], str],
    containers: list[PodContainer],
    tmp_path: Path,
) -> None:
    """uid 185 with a read-only root: Spark's scratch and HOME are the emptyDir; the
    driver reads the topic, writes every event once and commits the topic's end; a
    SIGTERM (what a kubelet sends first) stops it with exit 0 and its message."""
    cassandra.execute(EVENTS_TABLE.format(keyspace=cassandra_keyspace), timeout=60)
    topic = kafka_topic(partitions=2)
    count = 400
    produce(kafka_bootstrap, topic, count, factory=EventFactory(seed=5))
    pipeline = unique_name("img")[:40]
    spec = {
        "image": product_images["job"].image,
        "source": {"kafka": {"bootstrapServers": kafka_bootstrap, "topics": [topic]}},
        "transform": {"entrypoint": "sluice_job.examples.events:transform"},
        "sink": {
            "cassandra": {
                "contactPoints": [cassandra_contact],
                "keyspace": cassandra_keyspace,
                "table": "events",
            }
        },
        "checkpoint": {
            "cassandra": {"contactPoints": [cassandra_contact], "keyspace": cassandra_keyspace}
        },
        "trigger": {"intervalSeconds": 1},
        "spark": {"driver": {"cores": 1, "memory": "1g"}},
    }
    pod = driver_pod(spec, pipeline)
    metrics = free_port()
    container = run_pod(
        podman,
        pod,
        product_images["job"].image,
        tmp_path,
        env={"SLUICE_METRICS_PORT": str(metrics)},
    )
    containers.append(container)
    pipeline_id = f"test-cluster/tests/{pipeline}"
    ends = state.end_offsets(kafka_bootstrap, topic, 2)

    def committed() -> bool:
        if not container.running():
            raise AssertionError(f"the driver exited:\n{container.logs()[-3000:]}")
        return state.committed(cassandra, cassandra_keyspace, pipeline_id) == ends

    wait_for(committed, timeout=300, what="the driver in the image to commit the topic's end")
    rows = cassandra.execute(f"SELECT count(*) FROM {cassandra_keyspace}.events").one()[0]
    assert rows == count
    # The class archive the build made matches the image's JVM and class path, so the
    # driver's JVM maps it (a mismatch would be ignored and only slow the start).
    [started] = [
        json.loads(line)
        for line in container.logs().splitlines()
        if line.startswith("{") and '"spark session started"' in line
    ]
    assert started["class_archive"] is True, started
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as page:
        assert b"sluice_" in page.read()
    container.signal("TERM")
    assert container.wait_exit(timeout=150) == 0, container.logs()[-3000:]
    message = container.termination_message()
    assert message["exitCode"] == 0, message


def test_a_driver_with_a_bad_spec_exits_2_naming_the_field_in_its_termination_message(
    podman: Podman,
    product_images: dict[str, images.Built],
    containers: list[PodContainer],
    tmp_path: Path,
) -> None:
    """The message a kubelet puts in the pod's status, written to the read-only image's
    termination file; the JVM is never started for it."""
    spec = {
        "image": product_images["job"].image,
        "source": {"kafka": {"bootstrapServers": "127.0.0.1:1", "topics": ["t"]}},
        "transform": {"entrypoint": "sluice_job.examples.events:transform"},
        "sink": {"cassandra": {"contactPoints": ["127.0.0.1"], "keyspace": "a", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["127.0.0.1"]}},
    }
    pod = driver_pod(spec, "bad")
    broken = json.loads(
        next(
            e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "SLUICE_CONFIG"
        )
    )
    broken["trigger"] = {"intervalSeconds": -1}
    container = run_pod(
        podman,
        pod,
        product_images["job"].image,
        tmp_path,
        env={"SLUICE_CONFIG": json.dumps(broken)},
    )
    containers.append(container)
    assert container.wait_exit(timeout=120) == 2
    message = container.termination_message()
    assert (message["exitCode"], message["reason"]) == (2, "InvalidConfig")
    assert "trigger.intervalSeconds" in message["message"], message


def test_the_job_image_holds_java_17_the_jars_and_a_user_for_uid_185(
    podman: Podman, product_images: dict[str, images.Built]
) -> None:
    image = product_images["job"].image
    # java -version writes to stderr: the shell joins it to what is read.
    java = image_run(podman, image, "sh", "-c", "java -version 2>&1", user="185:185")
    assert 'version "17.' in java, java
    shown = image_run(
        podman,
        image,
        "python",
        "-c",
        "import os, pwd, sys; print(pwd.getpwuid(os.getuid()).pw_name); "
        "print(all(os.path.exists(j) for j in os.environ['SLUICE_SPARK_JARS'].split(','))); "
        "print(sys.version_info[:2])",
        user="185:185",
    )
    assert shown.split("\n")[:3] == ["sluice", "True", "(3, 11)"]


def test_the_operator_image_runs_a_pipeline_as_the_chart_runs_it(
    podman: Podman,
    product_images: dict[str, images.Built],
    agent_stack: Layout,
    standin_image: str,
    pipeline: Pipeline,
    namespace: str,
    containers: list[PodContainer],
    tmp_path: Path,
) -> None:
    """uid 10001, read-only root, no capabilities, the chart's command and probe path:
    healthy, and the pipeline's driver pod created and Running."""
    port = free_port()
    kubeconfig = readable_copy(agent_stack.kubeconfig, tmp_path / "kubeconfig", 10001)
    pod = {
        "metadata": {"name": "sluice-operator", "namespace": namespace},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001},
            "volumes": [{"name": "tmp", "emptyDir": {}}],
            "containers": [
                {
                    "name": "operator",
                    "command": ["python", "-m", "sluice_operator"],
                    "args": [
                        f"--namespace={namespace}",
                        f"--lease-namespace={namespace}",
                        "--http-host=127.0.0.1",
                        f"--http-port={port}",
                        "--no-leader-election",
                    ],
                    "env": [{"name": "KUBECONFIG", "value": "/etc/sluice/kubeconfig"}],
                    "securityContext": {
                        "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "resources": {"limits": {"memory": "512Mi"}},
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    "terminationMessagePath": "/dev/termination-log",
                }
            ],
        },
    }
    container = run_pod(
        podman,
        pod,
        product_images["operator"].image,
        tmp_path,
        mounts={"/etc/sluice/kubeconfig": kubeconfig},
    )
    containers.append(container)

    def healthy() -> bool:
        if not container.running():
            raise AssertionError(f"the operator exited:\n{container.logs()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    wait_for(healthy, timeout=120, what="the operator image's /healthz")
    pipeline.create(standin_spec(image=standin_image))
    status = pipeline.wait_phase("Running", epoch=1)
    assert status["driverPod"] == "kpis-driver-1"


def test_a_tampered_hash_fails_the_build_naming_the_package(podman: Podman, tmp_path: Path) -> None:
    """The operator image's list with pyyaml's hashes altered: the build stops at that
    distribution (uv's --require-hashes), naming it."""
    context = tmp_path / "context"
    for source in (
        "Dockerfile.operator",
        "requirements-uv.txt",
        "build-constraints.txt",
        "api",
        "operator",
    ):
        src = REPO_ROOT / source
        if src.is_dir():
            shutil.copytree(src, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            context.mkdir(exist_ok=True)
            shutil.copy(src, context / source)
    listing = context / "operator" / "requirements.txt"
    text = listing.read_text()
    start = text.index("\npyyaml==") + 1
    end = text.index("\n    # via", start)
    block = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, text[start:end])
    tampered = text[:start] + block + text[end:]
    listing.write_text(tampered)
    recipe = images.Recipe(
        "tampered", context / "Dockerfile.operator", context, {"PYTHON_IMAGE": images.bases.PYTHON}
    )
    with pytest.raises(PodmanError) as failed:
        images.build(podman, recipe)
    assert "pyyaml" in str(failed.value).lower()


DISTRIBUTIONS = (
    "import importlib.metadata as m, json; "
    "print(json.dumps(sorted([d.metadata['Name'], d.version] for d in m.distributions())))"
)


def custom_transform(name: str, example: Path, job: images.Built) -> images.Recipe:
    """The custom-transform example's image (its Dockerfile in ``example``) FROM ``job``."""
    return images.Recipe(
        name,
        example / "Dockerfile",
        example,
        bases={"PYTHON_IMAGE": images.bases.PYTHON},
        args={"JOB_IMAGE": job.image},
    )


def test_the_custom_transform_example_builds_from_the_job_image_and_adds_only_itself(
    podman: Podman, product_images: dict[str, images.Built]
) -> None:
    """examples/custom-transform/Dockerfile FROM the job image, as its README builds it:
    the transform imports as uid 185 on a read-only root, and the job's virtualenv holds
    what it held plus the example's own distribution, every pin unchanged."""
    job = product_images["job"]
    derived = images.build(
        podman, custom_transform("clickscore", REPO_ROOT / "examples" / "custom-transform", job)
    )
    before = json.loads(image_run(podman, job.image, "python", "-c", DISTRIBUTIONS, user="185:185"))
    after = json.loads(
        image_run(
            podman,
            derived.image,
            "python",
            "-c",
            f"from clickscore.transform import transform; {DISTRIBUTIONS}",
            user="185:185",
        )
    )
    assert sorted([*before, ["clickscore", "0.1.0"]]) == after
    config = podman.run(
        [
            "image",
            "inspect",
            "--format",
            "{{json .Config.Entrypoint}} {{.Config.User}}",
            derived.image,
        ]
    ).stdout.split()
    assert config == ['["python","-m","sluice_job"]', "185:185"]


def test_a_rebuild_of_the_custom_transform_after_a_code_change_holds_the_new_code(
    podman: Podman, product_images: dict[str, images.Built], tmp_path: Path
) -> None:
    """Reproduction (issue 39, item 5's review): the example installed its wheel from a
    RUN with the wheel stage bind-mounted, and buildah (podman's builder) reuses such a
    layer from its cache when the mounted files change, so an image rebuilt after a
    change to the transform held the old code (buildah issues 5400 and 6609). The
    wheel is copied now, and a rebuild takes the new code."""
    example = tmp_path / "custom-transform"
    shutil.copytree(REPO_ROOT / "examples" / "custom-transform", example)
    job = product_images["job"]

    def built() -> str:
        return images.build(podman, custom_transform("clickscore-rebuild", example, job)).image

    first = built()
    code = example / "src" / "clickscore" / "transform.py"
    code.write_text(code.read_text() + '\nREBUILT = "yes"\n')
    second = built()
    assert second != first
    probe = "from clickscore import transform; print(getattr(transform, 'REBUILT', 'no'))"
    assert image_run(podman, second, "python", "-c", probe, user="185:185").strip() == "yes"
