"""A container of a pod the operator builds, run with podman as a kubelet would run it.

The test has the operator build the pod (``sluice_operator.builders``) and runs its
container from the image built by ``make images``, with the settings a kubelet
would apply from the pod spec: the user and group of the pod's security context
(with no /etc/passwd entry made up for them, as a kubelet's runtime makes none),
a read-only root filesystem, every capability dropped, no privilege escalation,
podman's default seccomp profile (RuntimeDefault), the memory limit, each emptyDir
as a directory owned by ``fsGroup``, the termination message file, the env with its
``fieldRef`` values filled in. The container shares the machine's network (podman
sets none up here), so the pod IP is 127.0.0.1 and the stack's servers are where
the test's own clients find them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice_dev.oci.podman import Podman
from tests.support.waiting import wait_for

POD_IP = "127.0.0.1"


def memory_bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    return int(quantity)


def field_value(path: str, pod: Mapping[str, Any]) -> str:
    values = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"].get("namespace", "default"),
        "status.podIP": POD_IP,
    }
    return str(values[path])


@dataclass
class PodContainer:
    """One container started by ``podman run --detach``."""

    podman: Podman
    name: str
    workdir: Path

    @property
    def termination_file(self) -> Path:
        return self.workdir / "termination-log"

    def state(self) -> dict[str, Any]:
        result = self.podman.run(["inspect", "--format", "{{json .State}}", self.name], check=False)
        return dict(json.loads(result.stdout)) if result.returncode == 0 else {}

    def running(self) -> bool:
        return bool(self.state().get("Running"))

    def wait_exit(self, timeout: float) -> int:
        def exited() -> tuple[int] | None:  # a tuple: exit code 0 is a result too
            state = self.state()
            return None if state.get("Running", True) else (int(state["ExitCode"]),)

        try:
            return wait_for(exited, timeout=timeout, what=f"container {self.name} to exit")[0]
        except AssertionError as err:
            top = self.podman.run(["top", self.name, "pid", "ppid", "stat", "args"], check=False)
            raise AssertionError(
                f"{err}; its processes:\n{top.stdout}\nits output ends:\n{self.logs()[-3000:]}"
            ) from None

    def signal(self, sig: str) -> None:
        self.podman.run(["kill", "--signal", sig, self.name])

    def logs(self) -> str:
        result = self.podman.run(["logs", self.name], check=False)
        return result.stdout + result.stderr

    def termination_message(self) -> dict[str, Any]:
        return dict(json.loads(self.termination_file.read_text()))

    def remove(self) -> None:
        self.podman.run(["rm", "--force", "--time", "0", self.name], check=False)


def run_pod(
    podman: Podman,
    pod: Mapping[str, Any],
    image: str,
    workdir: Path,
    *,
    env: Mapping[str, str] | None = None,
    mounts: Mapping[str, Path] | None = None,
) -> PodContainer:
    """Start the pod's first container from ``image``; ``env`` overrides its values,
    ``mounts`` adds read-only host files (container path -> host path)."""
    spec = pod["spec"]
    [container] = spec["containers"]
    security = {**spec.get("securityContext", {}), **container.get("securityContext", {})}
    uid, gid = security["runAsUser"], security.get("runAsGroup", security["runAsUser"])
    fs_group = spec.get("securityContext", {}).get("fsGroup", gid)
    name = f"{pod['metadata']['name']}-{os.getpid()}-{len(list(workdir.iterdir()))}"
    # --passwd=false: podman adds a passwd entry for the uid when the image has none,
    # and a kubelet's runtime does not (the operator image crashed on real nodes in
    # getpass.getuser() with no entry for uid 10001, passing here).
    args = ["run", "--detach", "--name", name, "--network=host", f"--user={uid}:{gid}"]
    args.append("--passwd=false")
    if security.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if "ALL" in security.get("capabilities", {}).get("drop", []):
        args.append("--cap-drop=ALL")
    if security.get("allowPrivilegeEscalation") is False:
        args.append("--security-opt=no-new-privileges")
    limit = container.get("resources", {}).get("limits", {}).get("memory")
    if limit:
        args.append(f"--memory={memory_bytes(limit)}")
    empty_dirs = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
    for mount in container.get("volumeMounts", []):
        if mount["name"] in empty_dirs:
            host = workdir / f"volume-{mount['name']}"
            host.mkdir(mode=0o2775, exist_ok=True)
            os.chown(host, uid, fs_group)
            args.append(f"--volume={host}:{mount['mountPath']}:rw")
    termination = workdir / "termination-log"
    termination.touch()
    os.chown(termination, uid, fs_group)
    args.append(f"--volume={termination}:{container['terminationMessagePath']}:rw")
    for path, host in (mounts or {}).items():
        args.append(f"--volume={host}:{path}:ro")
    values: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            values[item["name"]] = item["value"]
        else:
            values[item["name"]] = field_value(item["valueFrom"]["fieldRef"]["fieldPath"], pod)
    values.update(env or {})
    for key, value in values.items():
        args += ["--env", f"{key}={value}"]
    command = container.get("command")
    if command:
        args += ["--entrypoint", json.dumps(command)]
    args += [image, *container.get("args", [])]
    podman.run(args, timeout=120)
    return PodContainer(podman, name, workdir)


def readable_copy(source: Path, dest: Path, uid: int) -> Path:
    """A copy of ``source`` only ``uid`` may read (a Secret's file, as a kubelet mounts it)."""
    dest.write_bytes(source.read_bytes())
    os.chown(dest, uid, uid)
    dest.chmod(0o400)
    return dest


def image_run(podman: Podman, image: str, *command: str, user: str) -> str:
    """What ``command`` prints in a throwaway container of ``image`` (read-only root)."""
    result = podman.run(
        [
            "run",
            "--rm",
            "--read-only",
            "--cap-drop=ALL",
            f"--user={user}",
            "--passwd=false",
            "--entrypoint",
            json.dumps(list(command[:1])),
            image,
            *command[1:],
        ],
        timeout=300,
    )
    return result.stdout
