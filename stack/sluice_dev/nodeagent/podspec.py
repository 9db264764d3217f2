"""A container of a pod, turned into a local launch plan: argv, environment, cwd.

Pure: Secrets and ConfigMaps come in through :class:`Sources`, the code root and the
per-container files through :class:`Placement`, so the kubelet's rules are testable
without a cluster. The rules followed:

* environment = the agent's base environment, then the "image" layer (``PYTHONPATH``
  with the code root first, ``HOSTNAME`` = pod name), then ``envFrom`` in order, then
  ``env`` in order (later wins), then ``SLUICE_TERMINATION_LOG``;
* ``env`` values and ``command``/``args`` expand ``$(VAR)`` from the pod-defined
  variables (``$$`` escapes, unknown references stay as written), like the kubelet;
* ``valueFrom``: ``fieldRef`` (metadata.name/namespace/uid, labels['k'],
  annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP(s): the
  pod's own loopback address from :func:`.podnet.pod_ip`, status.hostIP(s):
  127.0.0.1), ``secretKeyRef`` and ``configMapKeyRef`` with ``optional`` honoured;
  ``resourceFieldRef`` is not supported;
* termination message: the container's ``terminationMessagePath`` (default
  ``/dev/termination-log``) cannot be written here, so every container gets its own
  local file, named in ``SLUICE_TERMINATION_LOG``, and any occurrence of the
  spec's path inside ``command``/``args`` is rewritten to it (so
  ``echo boom > /dev/termination-log`` works unchanged);
* cwd = ``workingDir`` if set (created if missing, as runtimes do), else the code
  root, else the container's scratch directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kubernetes.client import V1Container, V1EnvFromSource, V1EnvVar, V1ObjectMeta, V1Pod

from sluice_dev.nodeagent.podnet import HOST_IP, pod_ip

TERMINATION_LOG_ENV = "SLUICE_TERMINATION_LOG"
DEFAULT_TERMINATION_PATH = "/dev/termination-log"

_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_LABEL_REF = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")


class ConfigError(Exception):
    """The container cannot be configured (the kubelet's CreateContainerConfigError)."""


class Sources(Protocol):
    """Where ``secretKeyRef``/``configMapKeyRef``/``envFrom`` values come from."""

    def secret(self, name: str) -> Mapping[str, str] | None: ...

    def config_map(self, name: str) -> Mapping[str, str] | None: ...


@dataclass(frozen=True)
class Placement:
    """Where one container instance lands on this machine."""

    code_root: Path | None
    scratch: Path
    termination_log: Path


@dataclass(frozen=True)
class LaunchPlan:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


def launch_plan(
    pod: V1Pod,
    container: V1Container,
    base_env: Mapping[str, str],
    place: Placement,
    sources: Sources,
) -> LaunchPlan:
    pod_env = pod_defined_env(pod, container, sources)
    message_path = container.termination_message_path or DEFAULT_TERMINATION_PATH
    words = [*(container.command or ()), *(container.args or ())]
    argv = tuple(
        expand(word, pod_env).replace(message_path, str(place.termination_log)) for word in words
    )
    if not argv:
        raise ConfigError(
            f"container {container.name!r} has no command: the node agent cannot run an "
            "image's entrypoint, give the pod a command"
        )
    env = {
        **base_env,
        **image_env(pod, base_env, place.code_root),
        **pod_env,
        TERMINATION_LOG_ENV: str(place.termination_log),
    }
    default_cwd = place.code_root or place.scratch
    cwd = Path(container.working_dir) if container.working_dir else default_cwd
    return LaunchPlan(argv=argv, env=env, cwd=cwd)


IMAGE_ENV_FILE = "image.env"
"""In a code root, the image's own environment (a Dockerfile's ``ENV`` lines): one
``NAME=value`` per line, ``#`` comments; e.g. where the job image keeps its jars."""


def image_env(pod: V1Pod, base_env: Mapping[str, str], code_root: Path | None) -> dict[str, str]:
    """What the image would contribute: its code on ``PYTHONPATH``, a hostname, and
    the variables of the code root's :data:`IMAGE_ENV_FILE`."""
    env = {"HOSTNAME": _meta(pod).name or ""}
    if code_root is not None:
        paths = [str(code_root), *filter(None, base_env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.update(read_image_env(code_root / IMAGE_ENV_FILE))
    return env


def read_image_env(path: Path) -> dict[str, str]:
    """The ``NAME=value`` lines of ``path`` (none if it does not exist)."""
    if not path.is_file():
        return {}
    env: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{path}:{number}: expected NAME=value, got {text!r}")
        env[name.strip()] = value
    return env


def pod_defined_env(pod: V1Pod, container: V1Container, sources: Sources) -> dict[str, str]:
    """``envFrom`` then ``env``, with ``$(VAR)`` expansion, as the kubelet builds them."""
    env: dict[str, str] = {}
    for source in container.env_from or ():
        env.update(_env_from(source, sources))
    for var in container.env or ():
        value = _env_value(pod, var, env, sources)
        if value is not None:
            env[var.name] = value
    return env


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: ``$$`` is a literal ``$``, unknown refs stay."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if text.startswith("$(", i):
            end = text.find(")", i + 2)
            if end != -1:
                name = text[i + 2 : end]
                out.append(env.get(name, text[i : end + 1]))
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def field_value(pod: V1Pod, path: str) -> str:
    """The value of a ``fieldRef.fieldPath`` for ``pod``."""
    meta, spec = _meta(pod), pod.spec
    match = _LABEL_REF.fullmatch(path)
    if match:
        values = (meta.labels if match[1] == "labels" else meta.annotations) or {}
        return values.get(match[2], "")
    simple = {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "metadata.uid": meta.uid,
        "spec.nodeName": spec.node_name if spec else None,
        "spec.serviceAccountName": spec.service_account_name if spec else None,
        "status.podIP": pod_ip(meta.uid) if meta.uid else None,
        "status.podIPs": pod_ip(meta.uid) if meta.uid else None,
        "status.hostIP": HOST_IP,
        "status.hostIPs": HOST_IP,
    }
    if path not in simple:
        raise ConfigError(f"fieldRef {path!r} is not supported by the node agent")
    return simple[path] or ""


def _env_value(
    pod: V1Pod, var: V1EnvVar, defined: Mapping[str, str], sources: Sources
) -> str | None:
    source = var.value_from
    if source is None:
        return expand(var.value or "", defined)
    if source.field_ref is not None:
        return field_value(pod, source.field_ref.field_path)
    if source.secret_key_ref is not None:
        ref = source.secret_key_ref
        return _key(
            "secret", ref.name or "", ref.key, bool(ref.optional), sources.secret(ref.name or "")
        )
    if source.config_map_key_ref is not None:
        ref2 = source.config_map_key_ref
        data = sources.config_map(ref2.name or "")
        return _key("configmap", ref2.name or "", ref2.key, bool(ref2.optional), data)
    raise ConfigError(f"env {var.name!r}: only fieldRef/secretKeyRef/configMapKeyRef are supported")


def _key(
    kind: str, name: str, key: str, optional: bool, data: Mapping[str, str] | None
) -> str | None:
    if data is None:
        if optional:
            return None
        raise ConfigError(f'{kind} "{name}" not found')
    if key not in data:
        if optional:
            return None
        raise ConfigError(f"couldn't find key {key} in {kind} {name}")
    return data[key]


def _env_from(source: V1EnvFromSource, sources: Sources) -> dict[str, str]:
    prefix = source.prefix or ""
    data: Mapping[str, str] | None
    if source.secret_ref is not None:
        name, optional = source.secret_ref.name or "", bool(source.secret_ref.optional)
        data, kind = sources.secret(name), "secret"
    elif source.config_map_ref is not None:
        name, optional = source.config_map_ref.name or "", bool(source.config_map_ref.optional)
        data, kind = sources.config_map(name), "configmap"
    else:
        return {}
    if data is None:
        if optional:
            return {}
        raise ConfigError(f'{kind} "{name}" not found')
    return {prefix + k: v for k, v in data.items() if _ENV_NAME.fullmatch(prefix + k)}


def _meta(pod: V1Pod) -> V1ObjectMeta:
    if pod.metadata is None:
        raise ConfigError("pod has no metadata")
    return pod.metadata
