"""The install steps of Dockerfile.operator and Dockerfile.job, run for real: no image
can be built here, so this test copies exactly what each Dockerfile COPYs into a
fresh build directory, runs its ``uv pip install`` line (same extra, same
constraints.txt) into a fresh virtualenv without pip, and runs the image's
ENTRYPOINT from that virtualenv, away from the source tree. It catches what a static
check cannot: a file the wheel needs but the Dockerfile does not copy, an extra that
does not resolve under the pins, an entrypoint that fails to import.

Unlike the Dockerfiles (UV_NO_CACHE=1) it uses uv's cache, so a warm run is fast and
needs no network. The elapsed time of each install is printed (pytest -s).
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
from pathlib import Path

import pytest

from sluice_dev import versions
from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.integration

UV = Path(sys.executable).parent / "uv"


def build_steps(dockerfile: Path) -> tuple[list[str], str]:
    """The sources the build stage COPYs, and its ``uv pip install`` command."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    build = text.split(" AS build", 1)[1].split("\nFROM ", 1)[0]
    sources = [
        source
        for line in build.splitlines()
        if line.startswith("COPY ") and "--from=" not in line
        for source in shlex.split(line)[1:-1]
    ]
    [install] = [line for line in build.splitlines() if "uv pip install" in line]
    return sources, install.split("&&", 1)[1].strip()


def install(dockerfile: Path, workdir: Path) -> tuple[Path, float]:
    sources, command = build_steps(dockerfile)
    src = workdir / "src"
    for source in sources:
        origin, target = REPO_ROOT / source, src / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, target)
    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    argv = shlex.split(command)
    assert argv[:3] == ["uv", "pip", "install"], command
    argv = [str(UV), *argv[1:]]
    argv[argv.index("/opt/venv/bin/python")] = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    started = time.monotonic()
    done = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, f"{' '.join(argv)}\n{done.stdout}\n{done.stderr}"
    return venv, elapsed


def in_venv(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs the venv's python outside the source tree, as the image would."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
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
