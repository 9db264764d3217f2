"""The install steps of Dockerfile.operator and Dockerfile.job, run for real: no image
can be built here, so this test copies exactly what each Dockerfile COPYs into a
fresh build directory, runs the ``uv`` commands of its install (the image's hashed
list with --require-hashes, the local packages without dependencies and their build
backend by hash, ``uv pip check``) into a fresh virtualenv without pip, and runs the
image's ENTRYPOINT from that virtualenv, away from the source tree. It catches what a
static check cannot: a file the wheel needs but the Dockerfile does not copy, a list
that does not hold what the packages need, an entrypoint that fails to import. And it
shows the hashes are required: an altered hash, or a dependency missing from the list,
fails the install naming the package.

Unlike the Dockerfiles (UV_NO_CACHE=1) it uses uv's cache, so a warm run is fast and
needs no download (the index is still asked for its listings). uv's cache only ever
adds: each run builds pyspark from its sdist again into a new entry (0.5-1.4 GB), so
every test here prunes the cache after itself (``uv cache prune`` keeps what the
newest entries use); without it a developer's disk filled after some forty runs.
The elapsed time of each install is printed (pytest -s).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice_dev import versions
from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.integration

UV = Path(sys.executable).parent / "uv"


def uv_env() -> dict[str, str]:
    """This environment without the virtualenv's own variables: uv installs where told."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}


def prune_cache() -> Path:
    """``uv cache prune`` on the cache the installs used; its directory."""
    subprocess.run([str(UV), "cache", "prune", "--quiet"], env=uv_env(), check=True, timeout=600)
    where = subprocess.run(
        [str(UV), "cache", "dir"], env=uv_env(), capture_output=True, text=True, check=True
    )
    return Path(where.stdout.strip())


@pytest.fixture(autouse=True)
def pruned_cache() -> Iterator[None]:
    """Every test's install leaves uv's cache pruned, passed or not."""
    yield
    prune_cache()


def build_steps(dockerfile: Path) -> tuple[list[str], list[list[str]]]:
    """The sources the build stage COPYs, and the ``uv`` commands of its install."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    build = text.split(" AS build", 1)[1].split("\nFROM ", 1)[0]
    sources = [
        source
        for line in build.splitlines()
        if line.startswith("COPY ") and "--from=" not in line
        for source in shlex.split(line)[1:-1]
    ]
    [install] = [line for line in build.splitlines() if "uv pip install" in line]
    steps = [shlex.split(step) for step in re.split(r"\s*&&\s*", install.removeprefix("RUN "))]
    return sources, [step for step in steps if step[0] == "uv"]


def copy_sources(dockerfile: Path, src: Path) -> list[list[str]]:
    """The build context the Dockerfile COPYs, in ``src``; its uv commands."""
    sources, commands = build_steps(dockerfile)
    for source in sources:
        origin, target = REPO_ROOT / source, src / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, target)
    return commands


def run_steps(commands: list[list[str]], src: Path, venv: Path) -> subprocess.CompletedProcess[str]:
    """The Dockerfile's uv commands in order, with this machine's uv and ``venv`` for
    /opt/venv; stops at the first that fails and returns it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = uv_env()
    done = subprocess.CompletedProcess[str]([], 0, "", "")
    for command in commands:
        argv = [str(UV), *command[1:]]
        argv[argv.index("/opt/venv/bin/python")] = str(venv / "bin" / "python")
        done = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return done
    return done


def install(dockerfile: Path, workdir: Path) -> tuple[Path, float]:
    commands = copy_sources(dockerfile, workdir / "src")
    assert [c[:3] for c in commands] == [["uv", "pip", "install"]] * 2 + [["uv", "pip", "check"]]
    venv = workdir / "venv"
    started = time.monotonic()
    done = run_steps(commands, workdir / "src", venv)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, f"{' '.join(done.args)}\n{done.stdout}\n{done.stderr}"
    return venv, elapsed


def in_venv(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs the venv's python outside the source tree, as the image would."""
    env = uv_env()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(venv / "bin" / "python"), *args],
        cwd=venv,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def where(venv: Path, *modules: str) -> dict[str, str | None]:
    script = (
        "import importlib.util, json, sys\n"
        "found = {m: importlib.util.find_spec(m) for m in sys.argv[1:]}\n"
        "print(json.dumps({m: s.origin if s else None for m, s in found.items()}))"
    )
    done = in_venv(venv, "-c", script, *modules)
    assert done.returncode == 0, done.stderr
    located: dict[str, str | None] = json.loads(done.stdout)
    return located


def test_operator_image_install_steps(tmp_path: Path) -> None:
    venv, elapsed = install(REPO_ROOT / "Dockerfile.operator", tmp_path)
    print(f"\nDockerfile.operator install steps in a fresh venv: {elapsed:.1f}s")
    ran = in_venv(venv, "-m", "sluice_operator", "--help")
    assert ran.returncode == 0, ran.stderr
    assert "--all-namespaces" in ran.stdout
    assert "--lease-namespace" in ran.stdout
    located = where(
        venv, "sluice_operator", "sluice_api", "kopf", "kubernetes", "pyspark", "sluice_job"
    )
    assert str(located["sluice_operator"]).startswith(str(venv)), located
    assert str(located["sluice_api"]).startswith(str(venv)), located
    assert located["kopf"] is not None
    assert located["pyspark"] is None, "the operator image does not carry Spark"
    assert located["sluice_job"] is None, "the operator image does not carry the driver"
    failed = in_venv(venv, "-c", "import pyspark")
    assert failed.returncode != 0
    assert "No module named 'pyspark'" in failed.stderr
    assert not (venv / "bin" / "pip").exists()


def test_job_image_install_steps(tmp_path: Path) -> None:
    venv, elapsed = install(REPO_ROOT / "Dockerfile.job", tmp_path)
    print(f"\nDockerfile.job install steps in a fresh venv: {elapsed:.1f}s")
    ran = in_venv(venv, "-m", "sluice_job", "--help")
    assert ran.returncode == 0, ran.stderr
    assert "SLUICE_CONFIG" in ran.stdout
    located = where(
        venv, "sluice_job", "sluice_api", "pyspark", "cassandra", "confluent_kafka", "kopf"
    )
    assert str(located["sluice_job"]).startswith(str(venv)), located
    assert str(located["sluice_api"]).startswith(str(venv)), located
    assert located["kopf"] is None, "the job image does not carry the operator's dependencies"
    others = where(venv, "sluice_operator", "sluice_dev")
    assert others == {"sluice_operator": None, "sluice_dev": None}
    version = in_venv(venv, "-c", "import pyspark; print(pyspark.__version__)")
    assert version.stdout.strip() == versions.SPARK
    builds = [
        entry
        for entry in (prune_cache() / "sdists-v10" / "pypi" / "pyspark" / versions.SPARK).iterdir()
        if entry.is_dir()
    ]
    assert len(builds) == 1, f"uv's cache keeps one pyspark build, not {len(builds)}: {builds}"


def tamper(requirements: Path, package: str) -> str:
    """Every hash of ``package`` in the file changed (first hex digit); its pin."""
    text = requirements.read_text()
    start = text.index(f"\n{package}==") + 1
    end = text.index("# via", start)
    block = re.sub(
        r"sha256:([0-9a-f])", lambda m: "sha256:" + ("1" if m[1] == "0" else "0"), text[start:end]
    )
    requirements.write_text(text[:start] + block + text[end:])
    return text[start:end].split()[0]


def test_an_altered_hash_refuses_the_image_install_naming_the_package(tmp_path: Path) -> None:
    """A distribution whose archive does not match the committed hash (here: the hash
    changed, as a tampered mirror would change the archive) fails the build, naming
    it; nothing of the install is left to ship."""
    commands = copy_sources(REPO_ROOT / "Dockerfile.operator", tmp_path / "src")
    pin = tamper(tmp_path / "src" / "operator" / "requirements.txt", "kopf")
    done = run_steps(commands, tmp_path / "src", tmp_path / "venv")
    assert done.returncode != 0
    assert f"Hash mismatch for `{pin}`" in done.stderr, done.stderr
    assert where(tmp_path / "venv", "kopf", "sluice_operator") == {
        "kopf": None,
        "sluice_operator": None,
    }


def test_a_dependency_missing_from_the_list_is_refused_naming_it(tmp_path: Path) -> None:
    """A dependency nobody pinned (a pyproject.toml changed without `make
    constraints`): the install asks for a hash it does not have and stops."""
    commands = copy_sources(REPO_ROOT / "Dockerfile.operator", tmp_path / "src")
    requirements = tmp_path / "src" / "operator" / "requirements.txt"
    text = requirements.read_text()
    start = text.index("\ndurationpy==") + 1
    end = text.index("# via", start)
    requirements.write_text(text[:start] + text[end:])
    done = run_steps(commands, tmp_path / "src", tmp_path / "venv")
    assert done.returncode != 0
    assert "no trusted hash was provided for: `durationpy`" in done.stderr, done.stderr
