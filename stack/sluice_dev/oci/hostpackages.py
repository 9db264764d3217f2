"""The Debian packages the image builds need on this machine, installed when missing.

podman and buildah build the images, runc runs their containers (crun refuses this
machine's hybrid cgroups), mmdebstrap makes the base images. They come from the
machine's Debian release (bookworm) by name: Debian's mirror keeps only a release's
newest point version, so a version cannot be pinned, and within a stable release
only fixes land. Installing needs root and runs ``apt-get update`` once, when a
package is missing; an installed machine is checked with one ``dpkg-query``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence

from sluice_dev.oci.podman import PodmanError

PACKAGES = ("podman", "buildah", "runc", "mmdebstrap")


def missing(packages: Sequence[str] = PACKAGES) -> list[str]:
    """The packages of ``packages`` that dpkg does not have installed."""
    if shutil.which("dpkg-query") is None:
        return list(packages)
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *packages],
        capture_output=True,
        text=True,
        check=False,
    )
    installed = {
        line.split()[0] for line in result.stdout.splitlines() if line.endswith(" installed")
    }
    return [p for p in packages if p not in installed]


def ensure(
    say: Callable[[str], None] = print,
    packages: Sequence[str] = PACKAGES,
    purpose: str = "the image builds",
) -> list[str]:
    """Install what is missing; the packages installed. Raises when it cannot."""
    needed = missing(packages)
    if not needed:
        return []
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise PodmanError(
            f"{purpose} need the Debian packages {', '.join(needed)}: install them "
            "as root (apt-get install " + " ".join(needed) + ")"
        )
    say(f"installing {', '.join(needed)} (Debian packages for {purpose})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *needed]):
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PodmanError(f"{' '.join(command[:2])} failed:\n{result.stderr[-3000:]}")
    return needed
