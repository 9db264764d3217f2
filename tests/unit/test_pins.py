"""The pinned, hashed requirement files (``make constraints``): every pin carries
hashes, the images' lists are the development environment's pins, every dependency
the pyproject.toml files declare is pinned, the build backend and uv are pinned at
the versions the build and the Makefile use, and the Makefile's install requires the
hashes. An install would fail on the first three (or, worse, a hand edit could let a
distribution through unchecked); these tests say which file and which package."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from sluice_dev import pins
from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.unit

FILES = [pins.CONSTRAINTS, *pins.IMAGE_REQUIREMENTS.values(), pins.BUILD_CONSTRAINTS,
         pins.UV_REQUIREMENTS]  # fmt: skip
DIGEST = "sha256:" + "a" * 64


def read(path: Path) -> dict[str, pins.Pin]:
    return pins.parse(path.read_text(), str(path.relative_to(REPO_ROOT)))


def project(directory: str) -> dict[str, object]:
    return tomllib.loads((REPO_ROOT / directory / "pyproject.toml").read_text())


def requirements(directory: str, extras: bool) -> list[str]:
    declared = project(directory)["project"]
    assert isinstance(declared, dict)
    found = list(declared.get("dependencies", []))
    if extras:
        for group in declared.get("optional-dependencies", {}).values():
            found.extend(group)
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_pin_carries_hashes(path: Path) -> None:
    pinned = read(path)
    assert pinned, f"{path.name} pins nothing"
    assert pins.unhashed(pinned) == [], f"{path.name}: run `make constraints`"


@pytest.mark.parametrize("image", sorted(pins.IMAGE_REQUIREMENTS))
def test_each_image_installs_the_development_environments_pins(image: str) -> None:
    """Same versions, same hashes: what the tests run with is what the image gets."""
    subset = read(pins.IMAGE_REQUIREMENTS[image])
    assert pins.disagreements(subset, read(pins.CONSTRAINTS)) == []
    needed = requirements("api", extras=False) + requirements(image, extras=False)
    assert pins.unpinned(needed, subset) == []
    other_side = {"kopf", "kubernetes"} if image == "job" else {"pyspark", "cassandra-driver"}
    assert other_side.isdisjoint(subset), f"{image} image list carries {other_side & set(subset)}"


def test_constraints_pin_every_declared_dependency_with_every_extra() -> None:
    declared = [r for d in (".", "api", "job", "operator") for r in requirements(d, extras=True)]
    assert pins.unpinned(declared, read(pins.CONSTRAINTS)) == []


def test_the_build_backend_is_pinned_at_the_version_the_packages_build_with() -> None:
    backends = {
        tuple(project(d)["build-system"]["requires"])  # type: ignore[index]
        for d in (".", "api", "job", "operator")
    }
    assert backends == {("hatchling==1.27.0",)}
    assert read(pins.BUILD_CONSTRAINTS)["hatchling"].version == "1.27.0"


def test_uv_is_pinned_at_the_makefiles_version() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    version = re.search(r"^UV_VERSION := (\S+)$", makefile, re.M)
    assert version is not None
    assert read(pins.UV_REQUIREMENTS)["uv"].version == version[1]


def test_the_makefile_installs_only_by_hash() -> None:
    """The development environment: third-party distributions from constraints.txt
    with --require-hashes, the own packages without dependencies, build backends by
    hash in both steps (pyspark is a source distribution), then ``uv pip check``; uv
    itself by hash."""
    text = re.sub(r"\\\n\s*", " ", (REPO_ROOT / "Makefile").read_text())
    rule = text.split("$(STAMP):", 1)[1].split("\nsetup:", 1)[0]
    commands = [shlex.split(line.strip().lstrip("@")) for line in rule.splitlines()[1:]]
    installs = [c for c in commands if "install" in c and "uninstall" not in c]
    assert installs == [
        ["$(BIN)/python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--require-hashes", "--no-deps", "-r", "requirements-uv.txt"],
        ["$(BIN)/uv", "pip", "install", "-q", "--python", "$(BIN)/python", "--require-hashes",
         "$(BUILD_HASHES)", "-r", "constraints.txt"],
        ["$(BIN)/uv", "pip", "install", "-q", "--python", "$(BIN)/python", "--no-deps",
         "$(BUILD_HASHES)", "-e", "./api", "-e", "./job", "-e", "./operator", "-e", "."],
    ]  # fmt: skip
    assert ["$(BIN)/uv", "pip", "check", "-q", "--python", "$(BIN)/python"] in commands
    build = re.search(r"^BUILD_HASHES := (.+)$", text, re.M)
    assert build is not None
    assert build[1].split() == [
        "--build-constraints",
        "build-constraints.txt",
        "--require-build-hashes",
    ]


def test_parse_reads_uvs_format() -> None:
    text = (
        "# header\n"
        f"PyYAML==6.0.3 \\\n    --hash={DIGEST} \\\n    --hash=sha256:{'b' * 64}\n"
        "    # via sluice-dev\n"
        "typing_extensions==4.16.0\n"
    )
    parsed = pins.parse(text)
    assert parsed["pyyaml"] == pins.Pin(
        "pyyaml", "6.0.3", frozenset({DIGEST, "sha256:" + "b" * 64})
    )
    assert pins.unhashed(parsed) == ["typing-extensions==4.16.0"]


@pytest.mark.parametrize("line", ["requests>=2", "-e ./api", "./job", "foo @ https://x/y.whl"])
def test_anything_but_an_exact_pin_is_an_error_naming_the_line(line: str) -> None:
    with pytest.raises(pins.PinError, match=rf"constraints.txt:2: '{re.escape(line)}'"):
        pins.parse(f"a==1 --hash={DIGEST}\n{line}\n", "constraints.txt")


def test_disagreements_name_the_package_and_what_differs() -> None:
    full = pins.parse(f"a==1 --hash={DIGEST}\nb==2 --hash={DIGEST}\n")
    image = pins.parse(
        f"a==1 --hash=sha256:{'c' * 64}\nb==3 --hash={DIGEST}\nz==1 --hash={DIGEST}\n"
    )
    assert pins.disagreements(image, full) == [
        "a==1: hashes differ from constraints.txt",
        "b: 3 here, 2 in constraints.txt",
        "z==1 is not in constraints.txt",
    ]


def test_unpinned_names_declared_distributions_without_a_pin() -> None:
    pinned = pins.parse(f"pydantic==2 --hash={DIGEST}\n")
    declared = ["pydantic>=2.7,<3", "sluice-api==0.1.0", "Google_Cloud.Datastore[x]>=2; x"]
    assert pins.unpinned(declared, pinned) == ["google-cloud-datastore"]
