"""podman with a store and configuration of the stack's own, apart from the machine's.

Every call gets ``CONTAINERS_CONF``, ``CONTAINERS_STORAGE_CONF`` and
``CONTAINERS_REGISTRIES_CONF`` pointing at files written here, so nothing the machine
(or another checkout) configured changes a build, and a build never touches the
machine's own image store. The choices, each for a reason of this machine:

- runtime ``runc`` (crun refuses the hybrid cgroup hierarchy), cgroup manager
  ``cgroupfs`` (no systemd);
- the store's overlay driver under the cache (``~/.cache/sluice/containers``), so
  base images and layers survive ``make clean`` like the other cached artifacts;
- no network set up by podman (``netns = "host"`` for builds: a build fetches from
  the package indexes, which this machine reaches from its own namespace; podman's
  bridge would add NAT rules and turn on forwarding in the machine's namespace);
- podman runs in the machine's network namespace (PID 1's) even when called from
  the stack's, which reaches no package index (a ``make test-node`` session builds
  the example's image FROM the job image there);
- ``nofile`` and ``nproc`` at or below the current limits (raising them is refused);
- no unqualified search registries: an image name that is not ``localhost/...``
  names nothing that can be pulled here, and fails at once.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sluice_dev.paths import Layout

NPROC_CEILING = 8192


class PodmanError(RuntimeError):
    """An image could not be built or run: the message names the command or package and
    holds the end of its output."""


def _limit(which: int, ceiling: int | None = None) -> int:
    soft, _hard = resource.getrlimit(which)
    if soft == resource.RLIM_INFINITY:
        soft = ceiling or 1_048_576
    return min(soft, ceiling) if ceiling else soft


def containers_conf() -> str:
    """containers.conf: runc, cgroupfs, host network, limits no higher than ours."""
    nofile = _limit(resource.RLIMIT_NOFILE)
    nproc = _limit(resource.RLIMIT_NPROC, NPROC_CEILING)
    return (
        "[containers]\n"
        'netns = "host"\n'
        'cgroupns = "host"\n'
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        "network_cmd_options = []\n"
    )


def storage_conf(root: Path) -> str:
    return (
        "[storage]\n"
        'driver = "overlay"\n'
        f'graphroot = "{root / "storage"}"\n'
        f'runroot = "{root / "run"}"\n'
    )


# What a failed build's cause looks like in its output (uv, pip, the shell, podman),
# however long the output after it.
CAUSE = re.compile(
    r"(?i)(^error|^\s*(\u00d7|\u2570\u2500\u25b6)|mismatch|not found|no such file|denied)"
)


def salient(output: str, most: int = 12) -> str:
    """The lines of ``output`` that say why, first: its end alone may be a hash list."""
    lines = [line.rstrip() for line in output.splitlines() if CAUSE.search(line)]
    return "".join(f"{line[:300]}\n" for line in lines[:most]) + ("...\n" if lines else "")


MACHINE_NETNS = Path("/proc/1/ns/net")


def machine_network() -> list[str]:
    """The prefix that runs a command in the machine's network namespace when this
    process is in another (the stack's); nothing when it is already there."""
    try:
        here = os.stat("/proc/self/ns/net").st_ino
        machine = os.stat(MACHINE_NETNS).st_ino
    except OSError:
        return []
    return [] if here == machine else ["nsenter", f"--net={MACHINE_NETNS}", "--"]


REGISTRIES_CONF = 'unqualified-search-registries = []\nshort-name-mode = "enforcing"\n'


@dataclass(frozen=True)
class Podman:
    """podman over the store in ``home``."""

    home: Path

    @classmethod
    def for_layout(cls, layout: Layout) -> Podman:
        return cls(layout.cache / "containers")

    @staticmethod
    def available() -> str | None:
        """Why podman cannot run here, or None."""
        for tool in ("podman", "runc", "buildah", "mmdebstrap"):
            if shutil.which(tool) is None:
                return f"{tool} is not installed (sluice-dev provision installs it)"
        if os.geteuid() != 0:
            return "podman needs root here (no user namespaces are set up for rootless)"
        return None

    def env(self) -> dict[str, str]:
        self.home.mkdir(parents=True, exist_ok=True)
        files = {
            "containers.conf": containers_conf(),
            "storage.conf": storage_conf(self.home),
            "registries.conf": REGISTRIES_CONF,
        }
        for name, text in files.items():
            path = self.home / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        return {
            **os.environ,
            "CONTAINERS_CONF": str(self.home / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.home / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(self.home / "registries.conf"),
            "TMPDIR": str(self._tmp()),
        }

    def _tmp(self) -> Path:
        tmp = self.home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return tmp

    def run(
        self,
        args: Sequence[str],
        *,
        timeout: float = 600,
        check: bool = True,
        extra_env: Mapping[str, str] | None = None,
        capture: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """``podman ARGS``; raises PodmanError with the output's end when it fails."""
        command = [*machine_network(), "podman", *args]
        result = subprocess.run(
            command,
            env={**self.env(), **(extra_env or {})},
            capture_output=capture,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            output = (result.stdout or "") + (result.stderr or "")
            raise PodmanError(
                f"podman {' '.join(args[:3])} exited {result.returncode}:\n"
                f"{salient(output)}{output[-4000:]}"
            )
        return result

    def image_id(self, name: str) -> str | None:
        """The id of the image called ``name``, or None when there is none."""
        result = self.run(["image", "inspect", "--format", "{{.Id}}", name], check=False)
        return result.stdout.strip() or None if result.returncode == 0 else None

    def image_size(self, name: str) -> int:
        result = self.run(["image", "inspect", "--format", "{{.Size}}", name])
        return int(result.stdout.strip())

    def tag(self, image: str, *names: str) -> None:
        self.run(["tag", image, *names])
