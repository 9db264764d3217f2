"""Base images made from Debian packages with mmdebstrap: no image registry is reachable.

The Dockerfiles name their bases by registry tag (``python:3.11.18-slim-bookworm``,
``eclipse-temurin:17...``) for a user with a registry; here each is made from
Debian bookworm's own packages (the package mirror is reachable, registries are
not) and passed as a build argument. Each base holds what its Dockerfile stage
expects of the registry image it stands for:

- ``base-python``: CPython 3.11 as ``python3`` with ``venv`` and ``ensurepip``, CA
  certificates, and the C++ runtime the JVM links against;
- ``base-jre``: the same with Debian's OpenJDK 17 headless runtime, copied with its
  links resolved to ``/opt/java/openjdk`` (where the Temurin image keeps it, the
  path Dockerfile.job copies from), so it runs on the python base without Debian's
  ``/etc/java-17-openjdk``.

Debian's mirror keeps only the newest point release of a package (no snapshot
archive is reachable), so the versions cannot be pinned; the suite and the package
names are, and the versions a base was made with are recorded in its label
``org.sluice.packages`` and printed. A base is made once and kept by the hash of its
recipe; ``refresh`` makes it again (to take Debian's security updates).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sluice_dev.oci.podman import Podman, PodmanError

SUITE = "bookworm"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PYTHON_PACKAGES = ("python3.11", "python3", "python3.11-venv", "ca-certificates", "libstdc++6")
JRE_HOME = "/opt/java/openjdk"
# Documentation, manual pages and translations are not needed in an image.
EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


@dataclass(frozen=True)
class Base:
    """One base image: its name, its packages and what is done after they install."""

    name: str
    packages: tuple[str, ...]
    hooks: tuple[str, ...] = ()
    """Run after the packages are installed (mmdebstrap's customize hooks)."""
    before: tuple[str, ...] = ()
    """Run before they are (essential hooks)."""
    recorded: tuple[str, ...] = ()
    """Packages whose versions are printed and labelled."""

    def key(self) -> str:
        recipe = [SUITE, MIRRORS, self.packages, self.hooks, EXCLUDES, PATH]
        if self.before:
            recipe.append(self.before)
        recipe_text = json.dumps(recipe)
        return hashlib.sha256(recipe_text.encode()).hexdigest()[:12]

    @property
    def image(self) -> str:
        """The image name the builds are given: ``localhost/sluice/NAME:KEY``."""
        return f"localhost/sluice/{self.name}:{self.key()}"


PYTHON = Base("base-python", PYTHON_PACKAGES, recorded=("python3.11",))
JRE = Base(
    "base-jre",
    (*PYTHON_PACKAGES, "openjdk-17-jre-headless"),
    # The JRE's postinst links its manual pages there (update-alternatives), which
    # fails when the directory is excluded and so missing.
    before=('mkdir -p "$1/usr/share/man/man1"',),
    # Inside the new root: its links are absolute, and must resolve there, not here. The
    # link to the excluded documentation dangles and is dropped first.
    hooks=(
        'chroot "$1" sh -c "find /usr/lib/jvm/java-17-openjdk-amd64 -xtype l -delete'
        f" && mkdir -p {Path(JRE_HOME).parent}"
        f' && cp -rL /usr/lib/jvm/java-17-openjdk-amd64 {JRE_HOME}"',
    ),
    recorded=("python3.11", "openjdk-17-jre-headless"),
)
BASES = (PYTHON, JRE)


@dataclass(frozen=True)
class Made:
    base: Base
    image: str
    packages: dict[str, str]
    seconds: float
    cached: bool

    def line(self) -> str:
        versions = ", ".join(f"{k} {v}" for k, v in self.packages.items())
        how = "cached" if self.cached else f"made in {self.seconds:.0f} s"
        return f"{self.image}: {versions} ({how})"


def ensure(podman: Podman, base: Base, *, refresh: bool = False) -> Made:
    """The base image, made with mmdebstrap and imported unless it is already there."""
    began = time.monotonic()
    if not refresh and podman.image_id(base.image):
        return Made(base, base.image, _label(podman, base.image), 0.0, cached=True)
    with tempfile.TemporaryDirectory(dir=podman.env()["TMPDIR"]) as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        versions = Path(tmp) / "versions"
        record = (
            f"dpkg-query --admindir=\"$1/var/lib/dpkg\" -W -f='${{Package}}=${{Version}}\\n' "
            f"{' '.join(base.recorded)} > {versions}"
        )
        command = [
            "mmdebstrap",
            "--mode=root",
            "--variant=minbase",
            "--format=tar",
            f"--include={','.join(base.packages)}",
            *(f"--dpkgopt=path-exclude={path}" for path in EXCLUDES),
            *(f"--essential-hook={hook}" for hook in base.before),
            *(f"--customize-hook={hook}" for hook in (*base.hooks, record)),
            '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
            SUITE,
            str(tarball),
            *MIRRORS,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
        if result.returncode != 0:
            raise PodmanError(
                f"mmdebstrap {base.name} exited {result.returncode}:\n{result.stderr[-4000:]}"
            )
        packages = dict(
            line.split("=", 1) for line in versions.read_text().splitlines() if "=" in line
        )
        podman.run(
            [
                "import",
                "--change",
                f"ENV PATH={PATH}",
                "--change",
                'CMD ["/bin/bash"]',
                "--change",
                f"LABEL org.sluice.packages={json.dumps(packages, separators=(',', ':'))}",
                str(tarball),
                base.image,
            ],
            timeout=900,
        )
    return Made(base, base.image, packages, time.monotonic() - began, cached=False)


def _label(podman: Podman, image: str) -> dict[str, str]:
    result = podman.run(
        ["image", "inspect", "--format", '{{index .Labels "org.sluice.packages"}}', image]
    )
    text = result.stdout.strip()
    return dict(json.loads(text)) if text.startswith("{") else {}
