"""Dockerfile.operator and Dockerfile.job, checked statically
(tests/integration/test_images.py builds and runs them): what a reviewer of an image
checks. Base images pinned, multi-stage with a final stage that holds no build tool,
a numeric non-root USER matching what the chart and the operator's pod builder run
as, COPY sources that exist and are not excluded from the build context, extras that
pyproject.toml defines, entrypoints that match the chart's and the pod builder's
commands and whose modules exist, and the driver's Kafka connector jars verified by
checksum (job/jars.txt), the same jars the local stack provisions."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from sluice_api import env as env_names
from sluice_api.spec import PipelineSpec
from sluice_dev import versions
from sluice_dev.oci.dockerfile import Dockerfile, parse
from sluice_dev.paths import REPO_ROOT, Layout
from sluice_dev.servers import nodeagent, spark
from sluice_operator import builders

pytestmark = pytest.mark.unit

OPERATOR = REPO_ROOT / "Dockerfile.operator"
JOB = REPO_ROOT / "Dockerfile.job"
BUILD_TOOLS = ("pip ", "pip3", "uv ", "gcc", "build-essential", "curl", "wget", "apt-get")


def listed_jars() -> list[tuple[str, str]]:
    """job/jars.txt as the build's job/fetch_jars.py reads it."""
    script = REPO_ROOT / "job" / "fetch_jars.py"
    spec = importlib.util.spec_from_file_location("fetch_jars", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    entries: list[tuple[str, str]] = module.listed(REPO_ROOT / "job" / "jars.txt")
    return entries


def entrypoint(file: Dockerfile) -> list[str]:
    [text] = file.final.all("ENTRYPOINT")
    command: list[str] = json.loads(text)
    return command


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize("path", [OPERATOR, JOB], ids=lambda p: p.name)
def test_base_images_are_pinned(path: Path) -> None:
    file = parse(path)
    names = {stage.name for stage in file.stages if stage.name}
    for stage in file.stages:
        image = file.expand(stage.base)
        if image in names or image == "scratch":
            continue
        reference, _, digest = image.partition("@")
        tag = reference.rpartition(":")[2]
        assert re.fullmatch(r"\d+\.\d+\.\d+[-_.\w]*", tag), f"{image}: pin a full version tag"
        assert "latest" not in tag
        assert not digest or re.fullmatch(r"sha256:[0-9a-f]{64}", digest), image


@pytest.mark.parametrize("path", [OPERATOR, JOB], ids=lambda p: p.name)
def test_the_security_guide_pins_every_base_image_by_digest_at_build_time(path: Path) -> None:
    """No registry is reachable where the Dockerfiles are written, so their base images
    are tags; docs/security.md gives the command that pins each by digest."""
    guide = (REPO_ROOT / "docs" / "security.md").read_text()
    command = guide.split("docker buildx build -f Dockerfile.job", 1)[1].split("```", 1)[0]
    for arg in (name for name in parse(path).args if name.endswith("_IMAGE")):
        assert f'--build-arg {arg}="$(digest "$(arg {arg})")"' in command
    assert "imagetools inspect" in guide
    assert f"-f {path.name}" in guide


@pytest.mark.parametrize("path", [OPERATOR, JOB], ids=lambda p: p.name)
def test_multi_stage_with_a_final_stage_free_of_build_tools(path: Path) -> None:
    file = parse(path)
    assert len(file.stages) >= 2
    final = file.final
    assert not final.all("RUN"), "the final stage runs nothing: it only copies results"
    names = {stage.name for stage in file.stages[:-1]}
    for copy in final.all("COPY"):
        source = re.match(r"--from=(\S+)", copy)
        assert source is not None, f"the final stage copies only from stages: {copy}"
        assert source[1] in names
    installers = [s for s in file.stages if any("uv pip install" in r for r in s.all("RUN"))]
    assert installers
    assert final not in installers


@pytest.mark.parametrize(
    ("path", "uid"),
    [(OPERATOR, None), (JOB, builders.RUN_AS_USER)],
    ids=["Dockerfile.operator", "Dockerfile.job"],
)
def test_final_user_is_numeric_non_root_and_what_pods_run_as(path: Path, uid: int | None) -> None:
    users = parse(path).final.all("USER")
    assert users, "the final stage sets USER"
    match = re.fullmatch(r"(\d+)(?::(\d+))?", users[-1])
    assert match, f"USER {users[-1]}: numeric, so runAsNonRoot can verify it"
    assert int(match[1]) != 0
    if uid is None:  # the operator: the chart's podSecurityContext
        values = yaml.safe_load((REPO_ROOT / "charts" / "sluice" / "values.yaml").read_text())
        uid = values["podSecurityContext"]["runAsUser"]
    assert int(match[1]) == uid


@pytest.mark.parametrize("path", [OPERATOR, JOB], ids=lambda p: p.name)
def test_copy_sources_exist_and_are_in_the_build_context(path: Path) -> None:
    ignored = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for stage in parse(path).stages:
        for copy in stage.all("COPY"):
            if copy.startswith("--from="):
                continue
            *sources, _target = shlex.split(copy)
            for source in sources:
                assert (REPO_ROOT / source).exists(), f"COPY {source}: no such path"
                top = source.split("/")[0]
                assert source not in ignored, f"{source} is excluded by .dockerignore"
                assert top not in ignored, f"{source} is excluded by .dockerignore"


@pytest.mark.parametrize(
    ("path", "distributions"),
    [(OPERATOR, ["sluice-api", "sluice-operator"]), (JOB, ["sluice-api", "sluice-job"])],
    ids=["operator", "job"],
)
def test_each_image_installs_only_its_own_distributions(
    path: Path, distributions: list[str]
) -> None:
    """The operator image carries the contract and the operator, the job image the
    contract and the driver: never the other side, never the local stack."""
    installs = [r for s in parse(path).stages for r in s.all("RUN") if "uv pip install" in r]
    directories = [d for run in installs for d in re.findall(r"\s\./(\w+)", run)]
    names = [
        tomllib.loads((REPO_ROOT / d / "pyproject.toml").read_text())["project"]["name"]
        for d in directories
    ]
    assert names == distributions
    copied = {c.split()[0] for s in parse(path).stages for c in s.all("COPY") if "--from" not in c}
    assert not any(source.startswith("stack") for source in copied), copied
    other = "job" if "sluice-operator" in distributions else "operator"
    assert not any(source.startswith(other) for source in copied), copied


def uv_commands(run: str) -> list[list[str]]:
    """The ``uv ...`` commands of a RUN line, each as its words."""
    return [shlex.split(c) for c in re.split(r"\s*&&\s*", run) if c.strip().startswith("uv ")]


@pytest.mark.parametrize(
    ("path", "own"), [(OPERATOR, "operator"), (JOB, "job")], ids=["operator", "job"]
)
def test_every_download_of_the_build_is_checked_against_a_committed_hash(
    path: Path, own: str
) -> None:
    """uv from requirements-uv.txt; third-party distributions only from the image's
    hashed list with --require-hashes (none without a matching hash); the local
    packages without dependencies, their build backend by hash; then ``uv pip check``.
    Any other ``pip install`` or ``uv pip install`` in the file is a download unchecked."""
    file = parse(path)
    runs = [r for s in file.stages for r in s.all("RUN")]
    [bootstrap] = [r for r in runs if "pip install" in r and "uv pip" not in r]
    assert [shlex.split(c) for c in re.split(r"\s*&&\s*", bootstrap)] == [
        ["python3", "-m", "venv", "/opt/uv"],
        [
            "/opt/uv/bin/pip",
            "install",
            "--require-hashes",
            "--no-deps",
            "-r",
            "requirements-uv.txt",
        ],
    ]
    third_party, local, check = [c for r in runs if "uv pip" in r for c in uv_commands(r)]
    venv = ["--python", "/opt/venv/bin/python"]
    assert third_party == [
        "uv",
        "pip",
        "install",
        *venv,
        "--require-hashes",
        "-r",
        f"{own}/requirements.txt",
        "--build-constraints",
        "build-constraints.txt",
        "--require-build-hashes",
    ]
    assert local == [
        "uv",
        "pip",
        "install",
        *venv,
        "--no-deps",
        "--build-constraints",
        "build-constraints.txt",
        "--require-build-hashes",
        "./api",
        f"./{own}",
    ]
    assert check == ["uv", "pip", "check", *venv]
    copied = {
        w
        for s in file.stages
        for c in s.all("COPY")
        if "--from" not in c
        for w in shlex.split(c)[:-1]
    }
    assert {"requirements-uv.txt", "build-constraints.txt", f"{own}/requirements.txt"} <= copied
    assert "constraints.txt" not in copied, "the image's own list, not the whole environment"


def test_the_operator_image_runs_what_the_chart_runs() -> None:
    command = entrypoint(parse(OPERATOR))
    assert command == ["python", "-m", "sluice_operator"]
    template = (REPO_ROOT / "charts" / "sluice" / "templates" / "deployment.yaml").read_text()
    assert "command: [python, -m, sluice_operator]" in template
    assert importlib.util.find_spec("sluice_operator.__main__") is not None


def test_the_job_image_runs_what_the_operator_gives_the_driver() -> None:
    spec = PipelineSpec.model_validate(
        {
            "image": "sluice-job:1",
            "source": {"kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}},
            "transform": {"entrypoint": "sluice_job.examples.kpi:transform"},
            "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "a", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
        }
    )
    pod = builders.driver_pod(builders.Owner("p", "ns", "u", "cluster-1"), spec, 1, "h")
    assert entrypoint(parse(JOB)) == pod["spec"]["containers"][0]["command"]
    assert importlib.util.find_spec("sluice_job.__main__") is not None


def test_the_job_image_serves_both_roles() -> None:
    """Its entrypoint alone runs the driver; with the argument Spark's executor pods
    pass (``executor``) it runs Spark's executor backend with the image's Java."""
    from sluice_job import cli, executor_backend

    command = entrypoint(parse(JOB))
    assert command[:3] == ["python", "-m", "sluice_job"]
    assert cli.parser().parse_args(command[3:]).role is None
    assert cli.parser().parse_args([*command[3:], "executor"]).role == "executor"
    [env] = parse(JOB).final.all("ENV")
    java_home = re.search(r"JAVA_HOME=(\S+)", env)
    assert java_home is not None
    spark_env = {
        "JAVA_HOME": java_home[1],
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
        "SPARK_EXECUTOR_ID": "1",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-app",
        "SPARK_EXECUTOR_POD_IP": "10.0.1.9",
    }
    argv = executor_backend.command(spark_env, Path("/opt/venv/lib/pyspark"))
    assert argv[0] == "/opt/java/openjdk/bin/java"
    assert executor_backend.BACKEND in argv


def test_the_local_node_agent_runs_the_job_images_entrypoint_for_args_only_pods(
    tmp_path: Path,
) -> None:
    """Spark's executor pods give only ``args``: the stack's agent must run what the
    job image's ENTRYPOINT would."""
    assert list(nodeagent.JOB_ENTRYPOINT) == entrypoint(parse(JOB))
    assert nodeagent.default_entrypoint_flag() in nodeagent.SERVERS[0].argv(
        Layout(cache=tmp_path / "cache", stack=tmp_path / "stack")
    )


def test_the_job_image_has_java_17() -> None:
    file = parse(JOB)
    [jre] = [s for s in file.stages if s.name == "jre"]
    assert file.expand(jre.base).split(":")[1].startswith("17.")
    [env] = file.final.all("ENV")
    assert "JAVA_HOME=/opt/java/openjdk" in env
    assert "--from=jre /opt/java/openjdk /opt/java/openjdk" in file.final.all("COPY")
    assert "--from=build /opt/sluice/jars /opt/sluice/jars" in file.final.all("COPY")


def test_the_job_image_makes_its_class_archive_with_the_runtime_it_ships() -> None:
    """The JVM maps an archive only if its own build and class path are the ones it
    was made with: so it is made from the same JRE and virtualenv, at the same paths
    as the final stage has them, and the final stage names it to the driver."""
    file = parse(JOB)
    [build] = [s for s in file.stages if s.name == "build"]
    assert "--from=jre /opt/java/openjdk /opt/java/openjdk" in build.all("COPY")
    [made] = [r for r in build.all("RUN") if "sluice_job.class_archive" in r]
    assert "JAVA_HOME=/opt/java/openjdk" in made
    assert "/opt/venv/bin/python -m sluice_job.class_archive /opt/sluice/spark.jsa" in made
    assert "--from=build /opt/venv /opt/venv" in file.final.all("COPY")
    assert "--from=jre /opt/java/openjdk /opt/java/openjdk" in file.final.all("COPY")
    assert "--from=build /opt/sluice/spark.jsa /opt/sluice/spark.jsa" in file.final.all("COPY")
    [env] = file.final.all("ENV")
    assert f"{env_names.SPARK_CLASS_ARCHIVE}=/opt/sluice/spark.jsa" in env


def test_connector_jars_are_the_provisioned_ones_with_their_checksums() -> None:
    layout = Layout.from_env()
    if not spark.ARTIFACT.ready(layout):
        where = spark.ARTIFACT.path(layout)
        pytest.fail(f"the connector jars are not provisioned ({where}): run `make provision`")
    provisioned = {
        jar.name: hashlib.sha256(jar.read_bytes()).hexdigest() for jar in spark.spark_jars(layout)
    }
    file = parse(JOB)
    [build] = [s for s in file.stages if s.name == "build"]
    assert "python3 job/fetch_jars.py ${MAVEN} job/jars.txt /opt/sluice/jars" in build.all("RUN")
    assert file.args["MAVEN"] == "https://repo1.maven.org/maven2"
    fetched = {jar.rsplit("/", 1)[1]: digest for jar, digest in listed_jars()}
    assert fetched == provisioned
    assert f"spark-sql-kafka-0-10_{versions.KAFKA_SCALA}-{versions.SPARK}.jar" in fetched
    assert f"kafka-clients-{versions.KAFKA}.jar" in fetched
    [env] = file.final.all("ENV")
    listed = re.search(r"SLUICE_SPARK_JARS=(\S+)", env)
    assert listed is not None
    assert sorted(Path(p).name for p in listed[1].split(",")) == sorted(fetched)
